// Write statements: one INSERT/UPDATE/DELETE in a data-modifying CTE, whose returned rows are
// shaped by the same select tree as a read (embeds included). The body is one JSON parameter
// read by jsonb_populate_record, so a bulk insert is one statement, all rows or none.
//
// A one-row insert answered with no more than its status (return=minimal) is the INSERT alone,
// its RETURNING the answer's row. Citus never plans an INSERT inside a WITH as one statement: it runs the INSERT
// first, keeps its rows on the coordinator as an intermediate result and runs the query around
// it there, which made such an insert cost the coordinator about twice the CPU of the INSERT
// alone (tests/scale/citus-commit.test.ts reads it from Citus's plan).
//
// A body of one row is inserted with VALUES, an array of rows by INSERT … SELECT over its
// elements. Both are one statement; they differ on a sharded database: Citus routes an INSERT …
// VALUES to the one shard of the row's workspace and commits it there in one phase, while it runs
// any INSERT … SELECT whose source is not a table through the coordinator (the rows copied to the
// shard as an intermediate result) and commits that in two phases (PREPARE TRANSACTION on the
// worker), which costs a request several more round trips.

import { catalog, compile, ident, join, qualified, sql, text, type Fragment } from '../sql.js';
import type { DeletePlan, InsertPlan, MutationPlan, UpdatePlan } from '../plan/write.js';
import type { FieldExpr, ReadNode } from '../plan/types.js';
import type { Output } from '../request/types.js';
import type { Column, Relation } from '../schema-cache/types.js';
import { compileNode, rowsShape, sentBody, tenantSql, topBudget, type ReadBounds, type Statement } from './read.js';
import { aliasRow, callOf, conditionSql, rowOf, type RowRef } from './expressions.js';

// The written rows come back as their columns (RETURNING alias.*), never as a whole-row value:
// on a sharded database (Citus) that value would be of the shard's row type, not the table's.
// An upsert adds a column of its own (pgrst_inserted), so `*` names the table's columns.
const SRC = sql`"pgrst_src"`;
const returnedRow = (relation: Relation): RowRef => {
  const col = (name: string) => sql`${SRC}.${ident(name)}`;
  return { col, row: () => rowOf(relation, col), star: () => join(relation.columnList.map((c) => col(c.name))) };
};

/**
 * The columns of the written rows that a representation reads (its fields, order, and the
 * columns its embeds join on), so that the write returns only those and a role with SELECT on
 * some columns gets back the ones it may read, as in PostgREST. undefined: every column (a `*`,
 * a computed field or a computed relationship takes the whole row).
 */
function readColumns(node: ReadNode): string[] | undefined {
  const names = new Set<string>();
  const add = (e: FieldExpr): boolean => {
    if (e.source.kind !== 'column') return false;
    names.add(e.source.column.name);
    return true;
  };
  for (const s of node.select) {
    if (s.kind === 'star' || (s.kind === 'field' && !add(s.expr))) return undefined;
  }
  if (!node.order.every((o) => o.kind === 'lifted' || o.via !== undefined || add(o.expr))) return undefined;
  for (const e of node.embeds) {
    if (e.relationship.computed) return undefined;
    for (const c of e.relationship.sourceColumns) names.add(c);
  }
  return [...names];
}

export type ReturnShape = 'representation' | 'headers-only' | 'minimal';

const jsonb = (json: string) => sql`${text(json)}::pg_catalog.jsonb`;
const ELEM = sql`"pgrst_body"."elem"`;

/** jsonb_build_object takes at most 100 arguments: 50 keys a call, the calls concatenated. */
const KEYS_PER_CALL = 50;

/**
 * A JSON body's record, and each written column's value from it. With columns=, the record is
 * built from the named keys only, so the others are never parsed. A column whose domain has a
 * cast from json (a data representation) reads its value through that function; its key is
 * kept out of what jsonb_populate_record parses, which would read it as the base type. In the
 * record (an UPDATE's FROM, each row of a bulk INSERT) that value is a column of
 * jsonb_to_record, as json, so the cast runs for each row written, as behind PostgREST: read as
 * a constant, Postgres folds an immutable cast while planning, and a PATCH matching no row
 * failed on a value it would never write. `inline` (one row's VALUES, always written) reads
 * the key itself.
 */
function bodyRecord(
  plan: InsertPlan | UpdatePlan,
  elem: Fragment,
): { record: Fragment; value: (c: Column) => Fragment; inline: (c: Column) => Fragment } {
  const table = qualified(plan.relation.schema, plan.relation.name);
  const represented = plan.columns.filter((c) => c.representation?.fromJson);
  let source: Fragment;
  if (plan.onlyNamed) {
    const parsed = plan.columns.filter((c) => !c.representation?.fromJson);
    const calls: Fragment[] = [];
    for (let i = 0; i < parsed.length; i += KEYS_PER_CALL) {
      const pairs = parsed.slice(i, i + KEYS_PER_CALL).map((c) => sql`${text(c.name)}, ${elem} -> ${text(c.name)}`);
      calls.push(sql`pg_catalog.jsonb_build_object(${join(pairs)})`);
    }
    source = calls.length > 0 ? join(calls, sql` || `) : sql`'{}'::pg_catalog.jsonb`;
  } else source = represented.reduce((e, c) => sql`(${e} - ${text(c.name)})`, elem);
  const populated = sql`pg_catalog.jsonb_populate_record(NULL::${table}, ${source})`;
  const asJson = represented.map((c) => sql`${ident(c.name)} pg_catalog.json`);
  const jsonRecord =
    represented.length > 0
      ? sql` CROSS JOIN LATERAL pg_catalog.jsonb_to_record(${elem}) AS "pgrst_json"(${join(asJson)})`
      : sql``;
  const cast = (c: Column, json: Fragment, otherwise: () => Fragment) =>
    c.representation?.fromJson ? callOf(c.representation.fromJson, json) : otherwise();
  return {
    record: sql`${populated} AS "pgrst_rec"${jsonRecord}`,
    value: (c) => cast(c, sql`"pgrst_json".${ident(c.name)}`, () => sql`"pgrst_rec".${ident(c.name)}`),
    inline: (c) =>
      cast(c, sql`(${elem} -> ${text(c.name)})::pg_catalog.json`, () => sql`(${populated}).${ident(c.name)}`),
  };
}

/** A column's default expression as the catalog has it, or NULL. */
const defaultOf = (c: Column): Fragment => (c.defaultExpr === null ? sql`NULL` : catalog(c.defaultExpr));

/**
 * Prefer: missing=default: a key the row leaves out takes the column's default. PostgREST
 * merges each row into an object of the defaults, so it evaluates a default for every row, the
 * rows that have the key too; here the default is the inner WHEN of such a row, its result
 * thrown away, so that a sequence advances as it does behind PostgREST.
 */
function orDefault(elem: Fragment, c: Column, value: Fragment): Fragment {
  const has = sql`${elem} ? ${text(c.name)}`;
  if (c.defaultExpr === null) return sql`CASE WHEN ${has} THEN ${value} ELSE NULL END`;
  const d = defaultOf(c);
  return sql`CASE WHEN ${has} THEN CASE WHEN (${d}) IS NULL THEN ${value} ELSE ${value} END ELSE ${d} END`;
}

function insertSql(plan: InsertPlan, table: Fragment, alias: Fragment, returning: Fragment): Fragment {
  const rel = plan.relation;
  const body = jsonb(plan.bodyJson);
  // One row: its object (the body's one element) read in VALUES; else each element in turn.
  const one = plan.rowCount === 1;
  const elem = one ? sql`(${body} -> 0)` : ELEM;
  const rec = bodyRecord(plan, elem);
  // No column named (`{}`): one row of defaults, written through the first writable column.
  const cols = plan.columns.length > 0 ? plan.columns : rel.columnList.filter((c) => !c.generated).slice(0, 1);
  const values = cols.map((c) => {
    if (plan.columns.length === 0) return defaultOf(c);
    const value = one ? rec.inline(c) : rec.value(c);
    return plan.missingDefault ? orDefault(elem, c, value) : value;
  });
  let conflict = sql``;
  if (plan.onConflict) {
    const action =
      plan.onConflict.action === 'nothing' || plan.columns.length === 0
        ? sql`DO NOTHING`
        : sql`DO UPDATE SET ${join(plan.columns.map((c) => sql`${ident(c.name)} = EXCLUDED.${ident(c.name)}`))}`;
    conflict = sql` ON CONFLICT (${join(plan.onConflict.columns.map(ident))}) ${action}`;
  }
  const into = sql`INSERT INTO ${table} AS ${alias} (${join(cols.map((c) => ident(c.name)))})`;
  if (one) return sql`${into} VALUES (${join(values)})${conflict} RETURNING ${returning}`;
  return sql`${into} SELECT ${join(values)} FROM pg_catalog.jsonb_array_elements(${body}) WITH ORDINALITY AS "pgrst_body"("elem", "ord") CROSS JOIN LATERAL ${rec.record} ORDER BY "pgrst_body"."ord"${conflict} RETURNING ${returning}`;
}

/**
 * The WHERE of an UPDATE or DELETE: its filters, or with limit/offset (and an order), the keys
 * (or, without a primary key, the row ids) of the rows the ordered, limited read would give.
 */
function whereSql(plan: UpdatePlan | DeletePlan, root: ReadNode, table: Fragment, alias: Fragment): Fragment {
  const row = aliasRow(root.alias, plan.relation);
  if (root.limit === undefined && (root.offset ?? 0) === 0) {
    return join([...tenantSql(root, row), ...plan.conditions.map((c) => conditionSql(c, row))], sql` AND `);
  }
  const node: ReadNode = {
    ...root,
    select: [],
    embeds: [],
    order: root.order.filter((o) => o.kind === 'field' && !o.via),
  };
  const c = compileNode(node, row, sql`FROM ${table} AS ${alias}`);
  const pk = plan.relation.primaryKey;
  const key = pk.length > 0 ? sql`(${join(pk.map((k) => row.col(k)))})` : sql`${alias}.ctid`;
  return sql`${key} IN (SELECT ${key} ${c.fromWhere}${c.orderLimit})`;
}

function mutationSql(plan: MutationPlan, root: ReadNode, returning: Fragment): Fragment {
  const rel = plan.relation;
  const table = qualified(rel.schema, rel.name);
  const alias = ident(root.alias);
  if (plan.kind === 'insert') return insertSql(plan, table, alias, returning);
  const where = whereSql(plan, root, table, alias);
  if (plan.kind === 'update') {
    if (plan.columns.length === 0) {
      // An empty PATCH changes nothing, but still runs (and is authorised) as a statement.
      return sql`SELECT ${returning} FROM ${table} AS ${alias} WHERE false`;
    }
    const body = jsonb(plan.bodyJson);
    const rec = bodyRecord(plan, body);
    // missing=default: a column the object leaves out is set to its default (PostgREST's PATCH).
    const value = (c: Column) =>
      plan.missingDefault && c.defaultExpr !== null
        ? sql`CASE WHEN ${body} ? ${text(c.name)} THEN ${rec.value(c)} ELSE ${defaultOf(c)} END`
        : rec.value(c);
    const set = join(plan.columns.map((c) => sql`${ident(c.name)} = ${value(c)}`));
    return sql`UPDATE ${table} AS ${alias} SET ${set} FROM ${rec.record} WHERE ${where} RETURNING ${returning}`;
  }
  return sql`DELETE FROM ${table} AS ${alias} WHERE ${where} RETURNING ${returning}`;
}

/**
 * How many rows an upsert inserted, not updated. xmax = 0: the row was inserted, not updated by
 * ON CONFLICT DO UPDATE. A view or a partitioned table returns no xmax: there a row whose conflict
 * columns (`matched`, returned with the rows) match a row that was there before the statement
 * (its snapshot) was updated, the others inserted.
 */
function upsertCount(plan: MutationPlan, alias: Fragment) {
  const rel = plan.relation;
  const upsert = plan.kind === 'insert' && plan.onConflict !== undefined;
  const xmax = rel.kind === 'table' && !rel.partitioned;
  const matched =
    plan.kind === 'insert' && !xmax && plan.onConflict?.action === 'update' ? plan.onConflict.columns : [];
  const cols = (row: Fragment) => join(matched.map((c) => sql`${row}.${ident(c)}`));
  const old = sql`"pgrst_old"`;
  const src = sql`"pgrst_src"`;
  const inserted = !upsert
    ? sql`NULL::int`
    : xmax
      ? sql`(SELECT pg_catalog.count(*) FROM pgrst_source WHERE "pgrst_inserted")::int`
      : matched.length > 0
        ? sql`((SELECT pg_catalog.count(*) FROM pgrst_source) - (SELECT pg_catalog.count(*) FROM ${qualified(rel.schema, rel.name)} AS ${old} WHERE (${cols(old)}) IN (SELECT ${cols(src)} FROM pgrst_source AS ${src})))::int`
        : sql`(SELECT pg_catalog.count(*) FROM pgrst_source)::int`;
  const insertedFlag = upsert && xmax ? sql`, (${alias}.xmax = 0) AS "pgrst_inserted"` : sql``;
  return { upsert, xmax, matched, insertedFlag, inserted };
}

/**
 * The statement of a write: one row of total_result_set (rows written), page_total, body (the
 * representation), location (the keys of the written rows, for return=headers-only) and
 * inserted (for an upsert: how many rows were new, not updated). Only a representation returns
 * whole rows; otherwise the write returns keys or nothing, so it needs no SELECT privilege.
 */
export function writeStatement(
  plan: MutationPlan,
  root: ReadNode,
  shape: ReturnShape,
  output: Output,
  bounds: ReadBounds = {},
): Statement {
  const rel = plan.relation;
  const alias = ident(root.alias);
  const pk = rel.primaryKey;
  const { upsert, xmax, matched, insertedFlag, inserted } = upsertCount(plan, alias);
  const matchedCols = join(
    matched.map((c) => sql`, ${alias}.${ident(c)}`),
    sql``,
  );
  const keyName = (i: number) => ident(`pgrst_k${i}`);
  const location =
    shape === 'headers-only' && pk.length > 0
      ? sql`(SELECT pg_catalog.json_agg(pg_catalog.json_build_array(${join(pk.map((_, i) => sql`"pgrst_src".${keyName(i)}::text`))}))::text FROM pgrst_source AS "pgrst_src")`
      : sql`NULL::text`;
  if (shape === 'representation') {
    const read = readColumns(root);
    const names = read && [...new Set([...read, ...matched])];
    const columns =
      names === undefined
        ? sql`${alias}.*`
        : names.length > 0
          ? join(names.map((c) => sql`${alias}.${ident(c)}`))
          : sql`1 AS "pgrst_one"`;
    const mutation = mutationSql(plan, root, sql`${columns}${insertedFlag}`);
    const representation: ReadNode = {
      ...root,
      tenant: undefined, // the written rows, tenant and all
      conditions: [],
      limit: undefined,
      offset: undefined,
    };
    const returned = returnedRow(rel);
    // A representation past the bound fails the statement: nothing is written.
    const budget = topBudget(bounds);
    const c = compileNode(representation, returned, sql`FROM pgrst_source AS "pgrst_src"`, { budget });
    const sent = sentBody(rowsShape(output), budget);
    return compile(
      sql`WITH pgrst_source AS (${mutation}), pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}${c.orderLimit}) SELECT (SELECT pg_catalog.count(*) FROM pgrst_source)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, ${sent.body} AS body, ${location} AS location, ${inserted} AS inserted ${sent.from}`,
    );
  }
  if (plan.kind === 'insert' && plan.rowCount === 1 && shape === 'minimal' && matched.length === 0) {
    // Its one row, or none when ON CONFLICT DO NOTHING skipped it (response/index.ts: nothing
    // written). Not for headers-only: Citus refuses a RETURNING that calls a function that is not
    // IMMUTABLE, which building the Location's JSON (or a key's text) can need.
    const insertedRow = !upsert ? sql`NULL::int` : xmax ? sql`(${alias}.xmax = 0)::int` : sql`1`;
    return compile(
      mutationSql(
        plan,
        root,
        sql`'1'::text AS total_result_set, 1 AS page_total, NULL::text AS body, NULL::text AS location, ${insertedRow} AS inserted`,
      ),
    );
  }
  const keys =
    shape === 'headers-only' && pk.length > 0
      ? join(pk.map((k, i) => sql`${alias}.${ident(k)} AS ${keyName(i)}`))
      : sql`1 AS "pgrst_one"`;
  const mutation = mutationSql(plan, root, sql`${keys}${matchedCols}${insertedFlag}`);
  return compile(
    sql`WITH pgrst_source AS (${mutation}) SELECT pg_catalog.count(*)::text AS total_result_set, pg_catalog.count(*)::int AS page_total, NULL::text AS body, ${location} AS location, ${inserted} AS inserted FROM pgrst_source`,
  );
}
