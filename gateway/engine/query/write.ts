// Write statements: one INSERT/UPDATE/DELETE in a data-modifying CTE, whose returned rows are
// shaped by the same select tree as a read (embeds included). The body is one JSON parameter
// expanded by jsonb_populate_record, so a bulk insert is one statement, all rows or none.

import { catalog, compile, ident, join, qualified, sql, text, type Fragment } from '../sql.js';
import type { InsertPlan, MutationPlan, UpdatePlan } from '../plan/write.js';
import type { ReadNode } from '../plan/types.js';
import type { MediaType } from '../request/types.js';
import type { Column, Relation } from '../schema-cache/types.js';
import { bodySql, compileNode, tenantSql, type Statement } from './read.js';
import { aliasRow, callOf, conditionSql, rowOf, type RowRef } from './sql.js';

// The written rows come back as their columns (RETURNING alias.*), never as a whole-row value:
// on a sharded database (Citus) that value would be of the shard's row type, not the table's.
const SRC = sql`"pgrst_src"`;
const returnedRow = (relation: Relation): RowRef => {
  const col = (name: string) => sql`${SRC}.${ident(name)}`;
  return { col, row: () => rowOf(relation, col), star: () => sql`${SRC}.*` };
};

export type ReturnShape = 'representation' | 'headers-only' | 'minimal';

const jsonb = (json: string) => sql`${text(json)}::pg_catalog.jsonb`;
const ELEM = sql`"pgrst_body"."elem"`;

/**
 * A JSON body's record, and each written column's value from it. A column whose domain has a
 * cast from json (a data representation) reads its value through that function; its key is
 * taken out of what jsonb_populate_record parses, which would read it as the base type.
 */
function bodyRecord(
  plan: InsertPlan | UpdatePlan,
  elem: Fragment,
): { record: Fragment; value: (c: Column) => Fragment } {
  const table = qualified(plan.relation.schema, plan.relation.name);
  const represented = plan.columns.filter((c) => c.representation?.fromJson);
  const stripped = represented.reduce((e, c) => sql`(${e} - ${text(c.name)})`, elem);
  return {
    record: sql`pg_catalog.jsonb_populate_record(NULL::${table}, ${stripped}) AS "pgrst_rec"`,
    value: (c) =>
      c.representation?.fromJson
        ? callOf(c.representation.fromJson, sql`(${elem} -> ${text(c.name)})::pg_catalog.json`)
        : sql`"pgrst_rec".${ident(c.name)}`,
  };
}

/** A column's default expression as the catalog has it, or NULL. */
const defaultOf = (c: Column): Fragment => (c.defaultExpr === null ? sql`NULL` : catalog(c.defaultExpr));

function insertSql(plan: InsertPlan, table: Fragment, alias: Fragment): Fragment {
  const rel = plan.relation;
  const rec = bodyRecord(plan, ELEM);
  // No column named (`{}`): one row of defaults, written through the first writable column.
  const cols = plan.columns.length > 0 ? plan.columns : rel.columnList.filter((c) => !c.generated).slice(0, 1);
  const values = cols.map((c) => {
    if (plan.columns.length === 0) return defaultOf(c);
    const value = rec.value(c);
    if (!plan.missingDefault) return value;
    return sql`CASE WHEN ${ELEM} ? ${text(c.name)} THEN ${value} ELSE ${defaultOf(c)} END`;
  });
  let conflict = sql``;
  if (plan.onConflict) {
    const action =
      plan.onConflict.action === 'nothing' || plan.columns.length === 0
        ? sql`DO NOTHING`
        : sql`DO UPDATE SET ${join(plan.columns.map((c) => sql`${ident(c.name)} = EXCLUDED.${ident(c.name)}`))}`;
    conflict = sql` ON CONFLICT (${join(plan.onConflict.columns.map(ident))}) ${action}`;
  }
  return sql`INSERT INTO ${table} AS ${alias} (${join(cols.map((c) => ident(c.name)))}) SELECT ${join(values)} FROM pg_catalog.jsonb_array_elements(${jsonb(plan.bodyJson)}) WITH ORDINALITY AS "pgrst_body"("elem", "ord") CROSS JOIN LATERAL ${rec.record} ORDER BY "pgrst_body"."ord"${conflict} RETURNING ${alias}.*`;
}

function mutationSql(plan: MutationPlan, root: ReadNode): Fragment {
  const rel = plan.relation;
  const table = qualified(rel.schema, rel.name);
  const alias = ident(root.alias);
  if (plan.kind === 'insert') return insertSql(plan, table, alias);
  const row = aliasRow(root.alias, rel);
  const where = join([...tenantSql(root, row), ...plan.conditions.map((c) => conditionSql(c, row))], sql` AND `);
  if (plan.kind === 'update') {
    if (plan.columns.length === 0) {
      // An empty PATCH changes nothing, but still runs (and is authorised) as a statement.
      return sql`SELECT ${alias}.* FROM ${table} AS ${alias} WHERE false`;
    }
    const rec = bodyRecord(plan, jsonb(plan.bodyJson));
    const set = join(plan.columns.map((c) => sql`${ident(c.name)} = ${rec.value(c)}`));
    return sql`UPDATE ${table} AS ${alias} SET ${set} FROM ${rec.record} WHERE ${where} RETURNING ${alias}.*`;
  }
  return sql`DELETE FROM ${table} AS ${alias} WHERE ${where} RETURNING ${alias}.*`;
}

export function writeStatement(plan: MutationPlan, root: ReadNode, shape: ReturnShape, media: MediaType): Statement {
  const mutation = mutationSql(plan, root);
  const returned = returnedRow(plan.relation);
  const pk = plan.relation.primaryKey;
  const location =
    pk.length > 0
      ? sql`(SELECT pg_catalog.json_agg(pg_catalog.json_build_array(${join(pk.map((k) => sql`(${returned.col(k)})::text`))}))::text FROM pgrst_source AS "pgrst_src")`
      : sql`NULL`;
  if (shape === 'representation') {
    const representation: ReadNode = {
      ...root,
      tenant: undefined, // the written rows, tenant and all
      conditions: [],
      order: [],
      limit: undefined,
      offset: undefined,
    };
    const c = compileNode(representation, returned, sql`FROM pgrst_source AS "pgrst_src"`);
    return compile(
      sql`WITH pgrst_source AS (${mutation}), pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}) SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ${bodySql(media)} AS body, ${location} AS location FROM pgrst_rows AS "_postgrest_t"`,
    );
  }
  return compile(
    sql`WITH pgrst_source AS (${mutation}) SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, ${location} AS location FROM pgrst_source`,
  );
}
