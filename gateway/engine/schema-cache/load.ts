// Loads the SchemaCache from pg_catalog: relations of the exposed schemas, their columns, keys,
// foreign keys (also through views, from the column origins Postgres records in a view's
// rewrite rule), junctions for many-to-many, computed fields (functions of a row type), and
// the functions served at /rpc with their parameters and return types.

import type { Sql } from 'postgres';
import { catalogText, compile, run, sql, text, type CatalogText, type Fragment } from '../sql.js';
import {
  relationKey,
  type Column,
  type Relation,
  type Relationship,
  type Routine,
  type SchemaCache,
  type Withheld,
} from './types.js';
import { viewColumnOrigins } from './view-origins.js';
import {
  holdsTenantRows,
  routineReason,
  unisolatedRelations,
  withheldByName,
  type TenantRelationRow,
  type ViewReadsRow,
} from './isolation.js';

interface RelationRow {
  oid: number;
  schema: string;
  name: string;
  relkind: string;
  description: string | null;
  exposed: boolean;
  /** A role the server may become has a privilege on it. */
  granted: boolean;
}
interface ColumnRow {
  relid: number;
  name: string;
  num: number;
  nullable: boolean;
  default_expr: string | null;
  generated: boolean;
  type_display: string;
  type_sql: string;
  base_type: string;
  is_array: boolean;
  description: string | null;
  readers: string[] | null;
}
interface KeyRow {
  relid: number;
  contype: string;
  conname: string;
  cols: string[];
  frelid: number | null;
  fcols: string[] | null;
}
interface ComputedRow {
  schema: string;
  name: string;
  relid: number;
  type_sql: string;
  base_type: string;
  is_array: boolean;
}
interface ViewRow {
  oid: number;
  action: string;
}
interface ComputedRelRow {
  schema: string;
  name: string;
  relid: number;
  target: number;
  setof: boolean;
  rows: number;
}
interface AttRow {
  relid: number;
  num: number;
  name: string;
}
interface TypeRow {
  name: string;
  type_sql: string;
}
interface CastRow {
  domain: string;
  direction: string;
  fn: string;
}

/** Schemas of the user's objects: keys and views there may connect exposed relations. */
const USER_SCHEMAS = sql`n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'`;
interface RoutineRow {
  oid: number;
  schema: string;
  name: string;
  volatility: string;
  setof: boolean;
  ndefaults: number;
  argnames: string[];
  argmodes: string[];
  ret_relid: number;
  ret_void: boolean;
  ret_record: boolean;
  ret_pseudo: boolean;
  type_sql: string;
  base_type: string;
  is_array: boolean;
  description: string | null;
  /** It runs as an owner that row-level security does not hold (SECURITY DEFINER of a superuser or BYPASSRLS role). */
  bypass: boolean;
}
interface RoutineArgRow {
  oid: number;
  i: number;
  type_sql: string;
  base_type: string;
  is_array: boolean;
  pseudo: boolean;
}

const TYPE_SQL = sql`
  CASE WHEN t.typcategory = 'A' AND t.typelem <> 0
       THEN format('%I.%I', en.nspname, et.typname) || '[]'
       ELSE format('%I.%I', tn.nspname, t.typname) END`;
const BASE_TYPE = sql`
  CASE WHEN t.typcategory = 'A' AND t.typelem <> 0 THEN coalesce(ebt.typname, et.typname)
       ELSE coalesce(bt.typname, t.typname) END`;
const TYPE_JOINS = sql`
  JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
  LEFT JOIN pg_catalog.pg_type bt ON bt.oid = t.typbasetype AND t.typtype = 'd'
  LEFT JOIN pg_catalog.pg_type et ON et.oid = t.typelem
  LEFT JOIN pg_catalog.pg_namespace en ON en.oid = et.typnamespace
  LEFT JOIN pg_catalog.pg_type ebt ON ebt.oid = et.typbasetype AND et.typtype = 'd'`;

/** Built-in types the planner names itself (a JSON path's result): catalog text, as loaded. */
export const BUILTIN_TYPES = {
  text: catalogText('pg_catalog.text'),
  json: catalogText('pg_catalog.json'),
  jsonb: catalogText('pg_catalog.jsonb'),
} as const;

/** The rows each catalog query answers, by query. */
interface CatalogRows {
  relations: RelationRow[];
  columns: ColumnRow[];
  keys: KeyRow[];
  computedFields: ComputedRow[];
  views: ViewRow[];
  types: TypeRow[];
  routines: RoutineRow[];
  routineArgs: RoutineArgRow[];
  attributes: AttRow[];
  casts: CastRow[];
  computedRelationships: ComputedRelRow[];
  tenantRelations: TenantRelationRow[];
  viewReads: ViewReadsRow[];
}

/**
 * The catalog queries after the relations'. `schemas` is the exposed schemas (text[]), `oids` the
 * exposed relations (oid[]); each travels as one parameter, a Postgres array literal. `tenant` is
 * the tenant column (text, NULL for none).
 */
const QUERIES: {
  [K in Exclude<keyof CatalogRows, 'relations'>]: (p: {
    schemas: Fragment;
    oids: Fragment;
    tenant: Fragment;
  }) => Fragment;
} = {
  columns: (p) => sql`
      SELECT a.attrelid::int AS relid, a.attname AS name, a.attnum::int AS num, NOT a.attnotnull AS nullable,
             coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid),
               (SELECT 'nextval(' || pg_catalog.quote_literal(pg_catalog.quote_ident(sn.nspname) || '.' || pg_catalog.quote_ident(sq.relname)) || '::regclass)'
                  FROM pg_catalog.pg_depend dep JOIN pg_catalog.pg_class sq ON sq.oid = dep.objid
                  JOIN pg_catalog.pg_namespace sn ON sn.oid = sq.relnamespace
                 WHERE a.attidentity <> '' AND dep.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                   AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum AND dep.deptype = 'i' AND sq.relkind = 'S'),
               (SELECT pg_catalog.pg_get_expr(dt.typdefaultbin, 0) FROM pg_catalog.pg_type dt
                 WHERE dt.oid = a.atttypid AND dt.typtype = 'd')) AS default_expr, a.attgenerated <> '' AS generated,
             pg_catalog.format_type(a.atttypid, a.atttypmod) AS type_display,
             ${TYPE_SQL} AS type_sql, ${BASE_TYPE} AS base_type,
             (t.typcategory = 'A' AND t.typelem <> 0) AS is_array,
             pg_catalog.col_description(a.attrelid, a.attnum) AS description,
             CASE WHEN rc.relkind = 'c' THEN NULL ELSE ARRAY(
               SELECT r.rolname::text FROM pg_catalog.pg_roles r
                WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                  AND pg_catalog.has_column_privilege(r.oid, a.attrelid, a.attnum, 'SELECT')) END AS readers
        FROM pg_catalog.pg_attribute a
        JOIN pg_catalog.pg_class rc ON rc.oid = a.attrelid
        JOIN pg_catalog.pg_type t ON t.oid = a.atttypid ${TYPE_JOINS}
        LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = ANY(${p.oids}) AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attrelid, a.attnum`,
  keys: () => sql`
      SELECT con.conrelid::int AS relid, con.contype::text AS contype, con.conname AS conname,
             ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
                     JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i) AS cols,
             nullif(con.confrelid, 0)::int AS frelid,
             CASE WHEN con.contype = 'f' THEN
               ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
                       JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i) END AS fcols
        FROM pg_catalog.pg_constraint con
        JOIN pg_catalog.pg_class c ON c.oid = con.conrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE ${USER_SCHEMAS} AND con.contype IN ('p', 'u', 'f') AND con.conparentid = 0
       ORDER BY con.conrelid, con.conname`,
  computedFields: (p) => sql`
      SELECT pn.nspname AS schema, p.proname AS name, at.typrelid::int AS relid,
             ${TYPE_SQL} AS type_sql, ${BASE_TYPE} AS base_type, (t.typcategory = 'A' AND t.typelem <> 0) AS is_array
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
        JOIN pg_catalog.pg_type at ON at.oid = p.proargtypes[0]
        JOIN pg_catalog.pg_type t ON t.oid = p.prorettype ${TYPE_JOINS}
       WHERE pn.nspname = ANY(${p.schemas}) AND p.prokind = 'f' AND p.pronargs = 1 AND at.typrelid <> 0
         AND NOT p.proretset AND t.typname <> 'void' AND t.typtype <> 'p'`,
  views: () => sql`
      SELECT c.oid::int AS oid, r.ev_action::text AS action
        FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE ${USER_SCHEMAS} AND c.relkind IN ('v', 'm') AND r.rulename = '_RETURN'`,
  types: (p) => sql`
      SELECT t.typname AS name, ${TYPE_SQL} AS type_sql
        FROM pg_catalog.pg_type t ${TYPE_JOINS}
       WHERE tn.nspname = 'pg_catalog' OR tn.nspname = ANY(${p.schemas})`,
  routines: (p) => sql`
      SELECT p.oid::int AS oid, pn.nspname AS schema, p.proname AS name, p.provolatile::text AS volatility,
             p.proretset AS setof, p.pronargdefaults::int AS ndefaults,
             coalesce(p.proargnames, '{}'::text[]) AS argnames, coalesce(p.proargmodes::text[], '{}'::text[]) AS argmodes,
             -- a domain over a table's row type returns that table's rows
             (CASE WHEN t.typtype = 'd' THEN (SELECT b.typrelid FROM pg_catalog.pg_type b WHERE b.oid = t.typbasetype)
                   ELSE t.typrelid END)::int AS ret_relid,
             t.oid = 'pg_catalog.void'::regtype AS ret_void,
             t.oid = 'pg_catalog.record'::regtype AS ret_record, t.typtype = 'p' AS ret_pseudo,
             ${TYPE_SQL} AS type_sql, ${BASE_TYPE} AS base_type, (t.typcategory = 'A' AND t.typelem <> 0) AS is_array,
             pg_catalog.obj_description(p.oid, 'pg_proc') AS description,
             p.prosecdef AND (o.rolsuper OR o.rolbypassrls) AS bypass
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
        JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
        JOIN pg_catalog.pg_type t ON t.oid = p.prorettype ${TYPE_JOINS}
       WHERE pn.nspname = ANY(${p.schemas}) AND p.prokind = 'f'
       ORDER BY p.oid`,
  routineArgs: (p) => sql`
      SELECT p.oid::int AS oid, a.i::int AS i, ${TYPE_SQL} AS type_sql, ${BASE_TYPE} AS base_type,
             (t.typcategory = 'A' AND t.typelem <> 0) AS is_array, t.typtype = 'p' AS pseudo
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
        CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS a(typ, i)
        JOIN pg_catalog.pg_type t ON t.oid = a.typ ${TYPE_JOINS}
       WHERE pn.nspname = ANY(${p.schemas}) AND p.prokind = 'f'
       ORDER BY p.oid, a.i`,
  // Column names of every user relation: views of the exposed schemas may read private tables.
  attributes: () => sql`
      SELECT a.attrelid::int AS relid, a.attnum::int AS num, a.attname AS name
        FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE ${USER_SCHEMAS} AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 AND NOT a.attisdropped`,
  // Data representations, as PostgREST finds them: implicit casts made by a function, of a
  // domain to json and to it from text or json. The domain may live in any schema (a table of
  // an exposed schema often has a column of a domain kept elsewhere, in public).
  casts: () => sql`
      SELECT format('%I.%I', dn.nspname, d.typname) AS domain,
             CASE WHEN c.castsource = d.oid THEN 'to'
                  WHEN c.castsource = 'pg_catalog.text'::regtype THEN 'fromText' ELSE 'fromJson' END AS direction,
             format('%I.%I', fn.nspname, f.proname) AS fn
        FROM pg_catalog.pg_cast c
        JOIN pg_catalog.pg_type d ON d.oid IN (c.castsource, c.casttarget) AND d.typtype = 'd'
        JOIN pg_catalog.pg_namespace dn ON dn.oid = d.typnamespace
        JOIN pg_catalog.pg_proc f ON f.oid = c.castfunc JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
       WHERE c.castcontext = 'i' AND c.castmethod = 'f'
         AND ((c.castsource = d.oid AND c.casttarget = 'pg_catalog.json'::regtype)
           OR (c.casttarget = d.oid AND c.castsource IN ('pg_catalog.text'::regtype, 'pg_catalog.json'::regtype)))`,
  // Relations of every user schema with the tenant column, and their row-level security
  // (isolation.ts): a view may read a table of a schema that is not exposed.
  tenantRelations: (p) => sql`
      SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS relkind,
             c.relrowsecurity AS rls, c.relforcerowsecurity AS forced,
             (SELECT count(*) FROM pg_catalog.pg_policy pol WHERE pol.polrelid = c.oid)::int AS policies
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE ${USER_SCHEMAS} AND c.relkind IN ('r', 'p', 'f', 'm')
         AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = c.oid AND a.attname = ${p.tenant} AND a.attnum > 0 AND NOT a.attisdropped)`,
  // Views of every user schema, the relations their query reads, and whether it reads them as a
  // role row-level security does not hold: its owner, unless security_invoker, being a superuser
  // or BYPASSRLS; a materialized view's rows were read when it was refreshed, for no one.
  viewReads: (p) => sql`
      SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS name,
             (c.relkind = 'm' OR ((o.rolsuper OR o.rolbypassrls) AND NOT EXISTS (
               SELECT 1 FROM unnest(c.reloptions) AS opt
                WHERE opt ~* '^security_invoker=(t|tr|tru|true|y|ye|yes|on|1)$'))) AS bypass,
             ARRAY(SELECT DISTINCT d.refobjid::int FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.objid = r.oid
                      AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid <> c.oid) AS reads
        FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_catalog.pg_roles o ON o.oid = c.relowner
       WHERE ${p.tenant} IS NOT NULL AND ${USER_SCHEMAS} AND c.relkind IN ('v', 'm') AND r.rulename = '_RETURN'`,
  // Computed relationships: a function of one row type returning rows of another relation.
  computedRelationships: (p) => sql`
      SELECT pn.nspname AS schema, p.proname AS name, at.typrelid::int AS relid, t.typrelid::int AS target,
             p.proretset AS setof, p.prorows::float8 AS rows
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
        JOIN pg_catalog.pg_type at ON at.oid = p.proargtypes[0]
        JOIN pg_catalog.pg_type t ON t.oid = p.prorettype
       WHERE pn.nspname = ANY(${p.schemas}) AND p.prokind = 'f' AND p.pronargs = 1 AND at.typrelid <> 0 AND t.typrelid <> 0`,
};

/**
 * Exposed relations first: the other queries need their oids. A partition is not one of them,
 * as in PostgREST: its partitioned table is queried, and relationships are the partitioned
 * tables' own (keys above skip the constraints Postgres copies onto each partition).
 */
const relationsQuery = (schemas: Fragment) => sql`
    SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS relkind,
           pg_catalog.obj_description(c.oid, 'pg_class') AS description, n.nspname = ANY(${schemas}) AS exposed,
           c.relkind <> 'c' AND EXISTS (
             SELECT 1 FROM pg_catalog.pg_roles r
              WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                AND (pg_catalog.has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE')
                  OR pg_catalog.has_any_column_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE'))) AS granted
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c') AND NOT c.relispartition
       AND (n.nspname = ANY(${schemas}) OR c.reltype IN (
         SELECT t FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace,
                LATERAL (VALUES (p.prorettype), (p.proargtypes[0])) AS types (t)
          WHERE pn.nspname = ANY(${schemas}) AND p.prokind = 'f'))`;

/**
 * Arrays go as Postgres array literals: postgres.js serialises a JS array only once it has
 * fetched the array types of the connection, which a reconnect after a restart could skip
 * (loads then failed with "malformed array literal"). A schema's name may hold any character
 * (config.ts), so each name is quoted; oids are integers.
 */
const arrayLiteral = (items: readonly (string | number)[]) =>
  `{${items.map((i) => (typeof i === 'number' ? i : `"${i.replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`;

async function readCatalog(db: Sql, schemaNames: string[], tenantColumn: string | undefined): Promise<CatalogRows> {
  const query = <T extends object[]>(f: Fragment) => run<T>(db, compile(f), false);
  const schemas = sql`${text(arrayLiteral(schemaNames))}::text[]`;
  const tenant = text(tenantColumn ?? null);
  const relations = await query<RelationRow[]>(relationsQuery(schemas));
  const oids = sql`${text(arrayLiteral(relations.map((r) => r.oid)))}::oid[]`;
  // One after the other, not pipelined: behind PgBouncer in transaction mode (1.18, Debian's)
  // autocommit statements pipelined on one client connection stall after the first few, and a
  // load that never ends holds every request. A dozen round trips once per schema load is cheap.
  const rows = { relations } as Record<string, object[]>;
  for (const k of Object.keys(QUERIES) as (keyof typeof QUERIES)[]) {
    rows[k] = await query<object[]>(QUERIES[k]({ schemas, oids, tenant }));
  }
  return rows as unknown as CatalogRows;
}

/**
 * The schema cache of `schemas`. With a tenant column, a relation that is not isolated
 * (isolation.ts) is left out, with the functions that return its rows: each is in `withheld`.
 */
export async function loadSchemaCache(db: Sql, schemas: string[], tenantColumn?: string): Promise<SchemaCache> {
  const rows = await readCatalog(db, schemas, tenantColumn);
  const [server] = await run<{ propagates: boolean }[]>(db, PROPAGATES_SET_LOCAL, false);
  const { byOid, relations } = relationsOf(rows.relations, rows.columns, representationsOf(rows.casts));
  const unisolated = withhold(rows, byOid, relations, tenantColumn);
  const keys = keysOf(rows.keys, byOid);
  addComputedFields(rows.computedFields, byOid);
  const views = viewOriginsOf(rows.views, rows.attributes, byOid);
  const exposures = exposuresOf(byOid, views);
  inheritViewKeys(views, keys, byOid, exposures);
  return {
    schemas,
    relations,
    relationships: relationshipsOf(rows.keys, rows.computedRelationships, keys, byOid, exposures),
    routines: routinesOf(rows.routines, rows.routineArgs, byOid, unisolated),
    types: typesOf(rows.types),
    withheld: unisolated.byName,
    ...(server?.propagates ? { propagatesSetLocal: true as const } : {}),
    loadedAt: new Date(),
  };
}

/**
 * Takes the relations that are not isolated out of `byOid` and `relations`, so that nothing
 * built after (keys, relationships, views, functions) reaches them: a relation an API role may
 * touch, or the row type of a function's result. Their oids and names, for the functions
 * (routinesOf) and the errors.
 */
function withhold(
  rows: CatalogRows,
  byOid: Map<number, Relation>,
  relations: Map<string, Relation>,
  tenantColumn: string | undefined,
): Unisolated {
  if (!tenantColumn) return { oids: new Map(), byName: new Map(), tenantish: () => false };
  const granted = new Set(rows.relations.filter((r) => r.granted).map((r) => r.oid));
  const candidates = [...byOid.values()].filter((r) => r.kind !== 'composite' && (r.hidden || granted.has(r.oid)));
  const tenantish = holdsTenantRows(rows.tenantRelations, rows.viewReads);
  const oids = unisolatedRelations(candidates, rows.tenantRelations, rows.viewReads, tenantColumn, tenantish);
  const byName = withheldByName(oids, byOid);
  for (const oid of oids.keys()) {
    const rel = byOid.get(oid)!;
    byOid.delete(oid);
    if (!rel.hidden) relations.delete(relationKey(rel.schema, rel.name));
  }
  return { oids, byName, tenantish };
}

/** What withhold() left out: by oid, and by schema.name (where functions are added). */
interface Unisolated {
  oids: Map<number, Withheld>;
  byName: Map<string, Withheld>;
  /** Whether a relation holds tenants' rows (a function returning them as a bypassing owner is withheld). */
  tenantish: (oid: number) => boolean;
}

/**
 * Whether this login's transactions copy a SET LOCAL to the other servers they reach: Citus does
 * where citus.propagate_set_commands is 'local' (a setting that exists only where Citus is loaded).
 */
const PROPAGATES_SET_LOCAL = compile(
  sql`SELECT coalesce(pg_catalog.current_setting('citus.propagate_set_commands', true), '') = 'local' AS propagates`,
);

type Representation = NonNullable<Column['representation']>;

/** Functions of the casts a domain declares to json, from text and from json, by domain. */
function representationsOf(casts: CastRow[]): Map<string, Representation> {
  const representations = new Map<string, Representation>();
  for (const c of casts) {
    const r = representations.get(c.domain) ?? {};
    const fn = catalogText(c.fn);
    if (c.direction === 'to') r.toJson = fn;
    else if (c.direction === 'fromText') r.fromText = fn;
    else r.fromJson = fn;
    representations.set(c.domain, r);
  }
  return representations;
}

/** Relations (composite types too, by oid) with their columns; addressable ones by schema.name. */
function relationsOf(
  relationRows: RelationRow[],
  columnRows: ColumnRow[],
  representations: Map<string, Representation>,
) {
  const byOid = new Map<number, Relation>();
  const relations = new Map<string, Relation>();
  for (const r of relationRows) {
    const rel: Relation = {
      oid: r.oid,
      schema: r.schema,
      name: r.name,
      kind: r.relkind === 'v' || r.relkind === 'm' ? 'view' : r.relkind === 'c' ? 'composite' : 'table',
      ...(r.relkind === 'p' ? { partitioned: true as const } : {}),
      columns: new Map(),
      columnList: [],
      primaryKey: [],
      uniqueKeys: [],
      computed: new Map(),
      description: r.description,
      ...(r.exposed ? {} : { hidden: true as const }),
    };
    byOid.set(r.oid, rel);
    // A composite type shapes function results, and so does a relation of a schema that is not
    // exposed; neither is a resource of its own.
    if (rel.kind !== 'composite' && r.exposed) relations.set(relationKey(r.schema, r.name), rel);
  }
  for (const c of columnRows) {
    const rel = byOid.get(c.relid)!;
    const col: Column = {
      name: c.name,
      typeSql: catalogText(c.type_sql),
      typeDisplay: c.type_display,
      baseType: c.base_type,
      isArray: c.is_array,
      nullable: c.nullable,
      defaultExpr: c.default_expr === null ? null : catalogText(c.default_expr),
      generated: c.generated,
      description: c.description,
      representation: c.is_array ? undefined : representations.get(c.type_sql),
      readers: c.readers,
    };
    rel.columns.set(c.name, col);
    rel.columnList.push(col);
  }
  return { byOid, relations };
}

type Keys = Map<number, { primary: string[]; unique: string[][] }>;

/** Keys of every user table, exposed or not (a view over a private table inherits them). */
function keysOf(keyRows: KeyRow[], byOid: Map<number, Relation>): Keys {
  const keys: Keys = new Map();
  for (const k of keyRows) {
    if (k.contype === 'f') continue;
    if (!keys.has(k.relid)) keys.set(k.relid, { primary: [], unique: [] });
    const own = keys.get(k.relid)!;
    if (k.contype === 'p') own.primary = k.cols;
    own.unique.push(k.cols);
    const rel = byOid.get(k.relid);
    if (rel) {
      if (k.contype === 'p') rel.primaryKey = k.cols;
      rel.uniqueKeys.push(k.cols);
    }
  }
  return keys;
}

/** Functions of a row type shown as its relation's computed fields (a column of that name wins). */
function addComputedFields(computedRows: ComputedRow[], byOid: Map<number, Relation>): void {
  for (const f of computedRows) {
    const rel = byOid.get(f.relid);
    if (rel && !rel.columns.has(f.name)) {
      rel.computed.set(f.name, {
        schema: f.schema,
        name: f.name,
        typeSql: catalogText(f.type_sql),
        baseType: f.base_type,
        isArray: f.is_array,
      });
    }
  }
}

/** Exposed view oid → its column name → the table column it shows. */
type ViewOrigins = Map<number, Map<string, { relid: number; column: string }>>;

/**
 * Each column of an exposed view followed back, through views of views in any schema, to the
 * table column it shows.
 */
function viewOriginsOf(viewRows: ViewRow[], attRows: AttRow[], byOid: Map<number, Relation>): ViewOrigins {
  const attnames = new Map<number, Map<number, string>>();
  for (const a of attRows) {
    if (!attnames.has(a.relid)) attnames.set(a.relid, new Map());
    attnames.get(a.relid)!.set(a.num, a.name);
  }
  // view oid → view column → origin
  const direct = new Map<number, Map<number, { relid: number; attnum: number }>>();
  for (const v of viewRows) {
    direct.set(v.oid, new Map(viewColumnOrigins(v.action).map((o) => [o.resno, { relid: o.relid, attnum: o.attnum }])));
  }
  const baseOf = (relid: number, attnum: number, seen: Set<number>): { relid: number; attnum: number } | undefined => {
    const origins = direct.get(relid);
    if (!origins) return { relid, attnum };
    if (seen.has(relid)) return undefined;
    seen.add(relid);
    const o = origins.get(attnum);
    return o && baseOf(o.relid, o.attnum, seen);
  };
  const viewOrigins: ViewOrigins = new Map();
  for (const v of viewRows) {
    if (!byOid.has(v.oid)) continue;
    const origins = new Map<string, { relid: number; column: string }>();
    for (const [resno, name] of attnames.get(v.oid) ?? []) {
      const base = baseOf(v.oid, resno, new Set());
      const column = base && base.relid !== v.oid ? attnames.get(base.relid)?.get(base.attnum) : undefined;
      if (base && column !== undefined) origins.set(name, { relid: base.relid, column });
    }
    viewOrigins.set(v.oid, origins);
  }
  return viewOrigins;
}

/**
 * The relation itself when exposed, and each exposed view that shows all of `cols` of it, with
 * the columns' names there (a view showing a column twice gives each combination, as PostgREST).
 */
type Exposures = (relid: number, cols: string[]) => { rel: Relation; cols: string[] }[];

function exposuresOf(byOid: Map<number, Relation>, viewOrigins: ViewOrigins): Exposures {
  return (relid, cols) => {
    const out: { rel: Relation; cols: string[] }[] = [];
    const self = byOid.get(relid);
    if (self && !self.hidden) out.push({ rel: self, cols });
    for (const [viewOid, origins] of viewOrigins) {
      if (byOid.get(viewOid)?.hidden) continue;
      let combos: string[][] = [[]];
      for (const c of cols) {
        const names = [...origins].filter(([, o]) => o.relid === relid && o.column === c).map(([n]) => n);
        combos = combos.flatMap((combo) => names.map((n) => [...combo, n]));
      }
      for (const combo of combos) out.push({ rel: byOid.get(viewOid)!, cols: combo });
    }
    return out;
  };
}

/**
 * A view's primary key is its base tables' primary keys that it shows whole, one after the other,
 * as PostgREST puts them together: a view joining two tables is keyed by both tables' keys.
 */
function inheritViewKeys(
  viewOrigins: ViewOrigins,
  keys: Keys,
  byOid: Map<number, Relation>,
  exposures: Exposures,
): void {
  for (const [viewOid, origins] of viewOrigins) {
    const view = byOid.get(viewOid)!;
    if (view.primaryKey.length > 0) continue;
    const key: string[] = [];
    for (const baseId of new Set([...origins.values()].map((o) => o.relid))) {
      const own = keys.get(baseId);
      if (!own || own.primary.length === 0) continue;
      const mapped = exposures(baseId, own.primary).find((e) => e.rel === view);
      if (mapped) key.push(...mapped.cols.filter((c) => !key.includes(c)));
    }
    if (key.length > 0) {
      view.primaryKey = key;
      view.uniqueKeys.push(key);
    }
  }
}

/**
 * Relationships by source oid: each foreign key both ways (one-to-one when its columns are
 * unique), computed relationships, and many-to-many through junction tables; each also through
 * every exposed view that shows the columns. The first of two equal relationships is kept.
 * A computed relationship named like a relation replaces the detected relationships from its
 * source to that relation, as in PostgREST, so a DBA can settle an ambiguous or unwanted
 * embed with a function.
 */
function relationshipsOf(
  keyRows: KeyRow[],
  computedRelRows: ComputedRelRow[],
  keys: Keys,
  byOid: Map<number, Relation>,
  exposures: Exposures,
): Map<number, Relationship[]> {
  const foreignKeys = keyRows.filter((k) => k.contype === 'f' && k.frelid !== null);
  const computed = computedRelationships(computedRelRows, byOid);
  const overridden = new Set(computed.map((r) => pairKey(r.source, r.computed!.schema, r.computed!.name)));
  const detected = [
    ...foreignKeys.flatMap((fk) => foreignKeyRelationships(fk, keys, exposures)),
    ...manyToManyRelationships(foreignKeys, keys, exposures),
  ].filter((r) => !overridden.has(pairKey(r.source, r.target.schema, r.target.name)));
  return bySourceOnce([...detected, ...computed]);
}

const pairKey = (source: Relation, schema: string, name: string) => JSON.stringify([source.oid, schema, name]);

/** Relationships grouped by their source's oid, in order, each distinct one once. */
function bySourceOnce(all: Relationship[]): Map<number, Relationship[]> {
  const relationships = new Map<number, Relationship[]>();
  const seen = new Set<string>();
  for (const r of all) {
    const id = JSON.stringify([
      r.cardinality,
      r.source.oid,
      r.target.oid,
      r.constraint,
      r.sourceColumns,
      r.targetColumns,
      r.junction?.relation.oid,
      r.junction?.junctionSourceColumns,
      r.junction?.junctionTargetColumns,
    ]);
    if (seen.has(id)) continue;
    seen.add(id);
    if (!relationships.has(r.source.oid)) relationships.set(r.source.oid, []);
    relationships.get(r.source.oid)!.push(r);
  }
  return relationships;
}

/** A foreign key both ways (one-to-one when its columns are unique), between every exposure of each side. */
function foreignKeyRelationships(fk: KeyRow, keys: Keys, exposures: Exposures): Relationship[] {
  const oneToOne = (keys.get(fk.relid)?.unique ?? []).some(
    (u) => u.length === fk.cols.length && u.every((c) => fk.cols.includes(c)),
  );
  const out: Relationship[] = [];
  for (const child of exposures(fk.relid, fk.cols)) {
    for (const parent of exposures(fk.frelid!, fk.fcols!)) {
      out.push({
        cardinality: oneToOne ? 'o2o' : 'm2o',
        source: child.rel,
        target: parent.rel,
        constraint: fk.conname,
        sourceColumns: child.cols,
        targetColumns: parent.cols,
      });
      out.push({
        cardinality: oneToOne ? 'o2o' : 'o2m',
        source: parent.rel,
        target: child.rel,
        constraint: fk.conname,
        sourceColumns: parent.cols,
        targetColumns: child.cols,
        reverse: true,
      });
    }
  }
  return out;
}

/** Computed relationships: functions of a row type returning rows of another relation (not of a composite type). */
function computedRelationships(computedRelRows: ComputedRelRow[], byOid: Map<number, Relation>): Relationship[] {
  const out: Relationship[] = [];
  for (const f of computedRelRows) {
    const source = byOid.get(f.relid);
    const target = byOid.get(f.target);
    if (!source || !target || source.kind === 'composite' || target.kind === 'composite') continue;
    out.push({
      cardinality: f.setof && f.rows !== 1 ? 'o2m' : 'm2o',
      source,
      target,
      constraint: f.name,
      sourceColumns: [],
      targetColumns: [],
      computed: { schema: f.schema, name: f.name },
    });
  }
  return out;
}

/**
 * Many-to-many: a table with two foreign keys whose columns are all part of its primary key,
 * itself exposed or shown by an exposed view, joins what the two keys reference.
 */
function manyToManyRelationships(foreignKeys: KeyRow[], keys: Keys, exposures: Exposures): Relationship[] {
  const byTable = new Map<number, KeyRow[]>();
  for (const fk of foreignKeys) {
    if (!byTable.has(fk.relid)) byTable.set(fk.relid, []);
    byTable.get(fk.relid)!.push(fk);
  }
  const out: Relationship[] = [];
  for (const [junctionId, fks] of byTable) {
    const primary = keys.get(junctionId)?.primary ?? [];
    const inPk = fks.filter((fk) => fk.cols.every((c) => primary.includes(c)));
    for (const a of inPk) {
      for (const b of inPk) {
        if (a !== b) out.push(...throughJunction(junctionId, a, b, exposures));
      }
    }
  }
  return out;
}

/** The many-to-many relationships from what key `a` references to what key `b` references, through every exposure of the junction. */
function throughJunction(junctionId: number, a: KeyRow, b: KeyRow, exposures: Exposures): Relationship[] {
  const out: Relationship[] = [];
  for (const j of exposures(junctionId, [...a.cols, ...b.cols])) {
    for (const src of exposures(a.frelid!, a.fcols!)) {
      for (const tgt of exposures(b.frelid!, b.fcols!)) {
        out.push({
          cardinality: 'm2m',
          source: src.rel,
          target: tgt.rel,
          constraint: b.conname,
          sourceColumns: src.cols,
          targetColumns: tgt.cols,
          junction: {
            relation: j.rel,
            sourceConstraint: a.conname,
            junctionSourceColumns: j.cols.slice(0, a.cols.length),
            junctionTargetColumns: j.cols.slice(a.cols.length),
          },
        });
      }
    }
  }
  return out;
}

/** Type names usable in casts (and the SQL aliases of built-in ones) → qualified type. */
function typesOf(typeRows: TypeRow[]): Map<string, CatalogText> {
  const types = new Map<string, CatalogText>();
  for (const t of typeRows) if (!types.has(t.name)) types.set(t.name, catalogText(t.type_sql));
  const aliases: Record<string, string> = {
    integer: 'int4',
    int: 'int4',
    bigint: 'int8',
    smallint: 'int2',
    boolean: 'bool',
    real: 'float4',
    'double precision': 'float8',
    decimal: 'numeric',
    'character varying': 'varchar',
    character: 'bpchar',
    char: 'bpchar',
    timestamptz: 'timestamptz',
    'timestamp with time zone': 'timestamptz',
    'timestamp without time zone': 'timestamp',
  };
  for (const [alias, name] of Object.entries(aliases)) {
    const t = types.get(name);
    if (t && !types.has(alias)) types.set(alias, t);
  }
  return types;
}

/**
 * Functions by schema.name. Input parameters are IN, INOUT and VARIADIC ones; the last
 * pronargdefaults of them may be left out. A function returning a row type of the exposed
 * schemas, or record with OUT/TABLE columns, returns rows that compose with select, filters and
 * embedding; pseudo-typed parameters or results (triggers, polymorphic) are not callable.
 */
function routinesOf(
  rows: RoutineRow[],
  argRows: RoutineArgRow[],
  byOid: Map<number, Relation>,
  unisolated: Unisolated,
): Map<string, Routine[]> {
  const args = new Map<number, RoutineArgRow[]>();
  for (const a of argRows) {
    if (!args.has(a.oid)) args.set(a.oid, []);
    args.get(a.oid)!.push(a);
  }
  const out = new Map<string, Routine[]>();
  for (const r of rows) {
    // A function returning rows of a relation that is not isolated is withheld with it, and one
    // that returns a tenant relation's rows as an owner row-level security does not hold.
    const of = unisolated.oids.get(r.ret_relid);
    const reason = of
      ? `${r.schema}.${r.name} returns its rows: ${of.reason}`
      : routineReason(r, byOid.get(r.ret_relid), unisolated.tenantish(r.ret_relid));
    if (reason) {
      unisolated.byName.set(relationKey(r.schema, r.name), { kind: 'function', reason });
      continue;
    }
    const routine = routineOf(r, args.get(r.oid) ?? [], byOid);
    if (!routine) continue;
    const key = relationKey(r.schema, r.name);
    if (!out.has(key)) out.set(key, []);
    out.get(key)!.push(routine);
  }
  return out;
}

/** One function as the schema cache knows it, or undefined when it is not callable. */
function routineOf(r: RoutineRow, argTypes: RoutineArgRow[], byOid: Map<number, Relation>): Routine | undefined {
  const { inputs, outColumns, pseudoInput } = parametersOf(r, argTypes);
  if (pseudoInput || (r.ret_pseudo && !r.ret_void && !r.ret_record)) return undefined;
  return {
    oid: r.oid,
    schema: r.schema,
    name: r.name,
    params: inputs,
    returns: returnsOf(r, outColumns, byOid),
    volatility: r.volatility === 'i' ? 'immutable' : r.volatility === 's' ? 'stable' : 'volatile',
    description: r.description,
  };
}

/** Input parameters (IN, INOUT, VARIADIC; the last `ndefaults` optional) and output columns (OUT, INOUT, TABLE). */
function parametersOf(
  r: RoutineRow,
  argTypes: RoutineArgRow[],
): { inputs: Routine['params']; outColumns: Column[]; pseudoInput: boolean } {
  const modes = r.argmodes.length > 0 ? r.argmodes : argTypes.map(() => 'i');
  const inputs: Routine['params'] = [];
  const outColumns: Column[] = [];
  let pseudoInput = false;
  argTypes.forEach((t, k) => {
    const mode = modes[k] ?? 'i';
    const name = r.argnames[k] ?? '';
    if (mode === 'i' || mode === 'b' || mode === 'v') {
      if (t.pseudo) pseudoInput = true;
      inputs.push({
        name,
        typeSql: catalogText(t.type_sql),
        baseType: t.base_type,
        isArray: t.is_array,
        required: true,
        ...(mode === 'v' ? { variadic: true } : {}),
      });
    }
    if (mode === 'o' || mode === 'b' || mode === 't') {
      outColumns.push({
        name,
        typeSql: catalogText(t.type_sql),
        typeDisplay: t.base_type,
        baseType: t.base_type,
        isArray: t.is_array,
        nullable: true,
        defaultExpr: null,
        generated: false,
        description: null,
      });
    }
  });
  inputs.forEach((p, k) => {
    p.required = k < inputs.length - r.ndefaults;
  });
  return { inputs, outColumns, pseudoInput };
}

/** What a function returns: nothing, rows of an exposed relation or of its own OUT columns, or a scalar. */
function returnsOf(r: RoutineRow, outColumns: Column[], byOid: Map<number, Relation>): Routine['returns'] {
  if (r.ret_void) return { setOf: r.setof, kind: 'void' };
  // OUT, INOUT or TABLE columns are the rows' columns, even one (PostgREST: {"num_plus_one": 6}).
  if (outColumns.length > 0) {
    const relation: Relation = {
      oid: -r.oid,
      schema: r.schema,
      name: r.name,
      kind: 'composite',
      columns: new Map(outColumns.map((c) => [c.name, c])),
      columnList: outColumns,
      primaryKey: [],
      uniqueKeys: [],
      computed: new Map(),
      description: null,
    };
    return { setOf: r.setof, kind: 'composite', relation };
  }
  if (r.ret_relid !== 0 && byOid.has(r.ret_relid))
    return { setOf: r.setof, kind: 'composite', relation: byOid.get(r.ret_relid) };
  const returns: Routine['returns'] = { setOf: r.setof, kind: 'scalar' };
  if (r.ret_relid === 0 && !r.ret_record) returns.scalar = { baseType: r.base_type, isArray: r.is_array };
  return returns;
}
