// Read statements (PostgREST's QueryBuilder): a ReadNode tree compiled to one SELECT whose
// JSON body Postgres itself writes (json_agg), with embeds as lateral joins.

import {
  catalog,
  claim,
  compile,
  count,
  ident,
  join,
  qualified,
  sql,
  text,
  type CatalogText,
  type CompiledSql,
  type Fragment,
} from '../sql.js';
import type { Embed, PlanOrder, ReadNode } from '../plan/types.js';
import { spreadColumns } from '../plan/spread.js';
import type { AggregateFn, Output } from '../request/types.js';
import { aliasRow, callOf, conditionSql, fieldSql, outputSql, type RowRef } from './expressions.js';
import { defined } from '../invariant.js';
import { RESPONSE_COLUMNS } from './settings.js';

export interface CompiledNode {
  select: Fragment;
  /** FROM … joins … WHERE …, without order and limit: shared by the page and the count. */
  fromWhere: Fragment;
  /** GROUP BY the non-aggregated outputs, when the node aggregates; else empty. */
  groupBy: Fragment;
  orderLimit: Fragment;
}

export interface CompileOptions {
  extraWhere?: Fragment[];
  /**
   * A to-one spread child: its aggregates are applied by the parent (PostgREST treats a spread
   * resource's columns as the parent's), so the child yields their raw inputs.
   */
  lift?: boolean;
  /** The read's byte budget at this node's level (withinBudget), or none. */
  budget?: Budget;
}

const AGGREGATES: Record<AggregateFn, Fragment> = {
  count: sql`pg_catalog.count`,
  sum: sql`pg_catalog.sum`,
  avg: sql`pg_catalog.avg`,
  max: sql`pg_catalog.max`,
  min: sql`pg_catalog.min`,
};

function aggregateSql(fn: AggregateFn, arg: Fragment | undefined, cast: CatalogText | undefined): Fragment {
  const out = arg === undefined ? sql`pg_catalog.count(*)` : sql`${AGGREGATES[fn]}(${arg})`;
  return cast ? sql`CAST(${out} AS ${catalog(cast)})` : out;
}

/** `row.tenant_column = <the caller's tenant claim>`, for a node that has a tenant (ReadNode.tenant). */
export function tenantSql(node: ReadNode, row: RowRef): Fragment[] {
  const t = node.tenant;
  return t ? [sql`${row.col(t.column.name)} = ${claim(t.claim)}::${catalog(t.column.typeSql)}`] : [];
}

/** A node that selects no column, at any depth: PostgREST leaves such an embed out of the output. */
function isEmpty(node: ReadNode): boolean {
  return node.select.every((item) => item.kind === 'embed' && isEmpty(item.embed.node));
}

const EMPTY_JSON_ARRAY = sql`'[]'::json`;

/** The parts of a node's SELECT, for a row reached through `row` (its own alias in reads). */
export function compileNode(node: ReadNode, row: RowRef, from: Fragment, options: CompileOptions = {}): CompiledNode {
  // Outputs in order; plain ones are the grouping keys when any output aggregates. json values
  // (embeds) have no equality operator, so an aggregating node groups them as jsonb.
  const outputs: { sql: Fragment; key?: string; plain: boolean; json?: boolean; star?: 'row' | 'column' }[] = [];
  const plain = (out: Fragment, key: string, json = false) => outputs.push({ sql: out, key, plain: true, json });
  const aggregate = (out: Fragment, key: string) => outputs.push({ sql: out, key, plain: false });
  const joins: Fragment[] = [];
  for (const item of node.select) {
    if (item.kind === 'star') {
      // `alias.*`, or its columns one by one when they become grouping keys or some column has
      // a data representation.
      if (node.relation.columnList.some((c) => c.representation?.toJson)) {
        for (const c of node.relation.columnList) {
          plain(c.representation?.toJson ? callOf(c.representation.toJson, row.col(c.name)) : row.col(c.name), c.name);
        }
        continue;
      }
      outputs.push({ sql: row.star(), plain: false, star: 'row' });
      for (const c of node.relation.columnList)
        outputs.push({ sql: row.col(c.name), key: c.name, plain: true, star: 'column' });
    } else if (item.kind === 'field') {
      if (item.aggregate && !options.lift)
        aggregate(aggregateSql(item.aggregate.fn, fieldSql(item.expr, row), item.aggregate.cast), item.key);
      else plain(item.aggregate ? fieldSql(item.expr, row) : outputSql(item.expr, row), item.key);
    } else if (item.kind === 'count') {
      if (options.lift) plain(sql`1`, item.key);
      else aggregate(aggregateSql('count', undefined, item.cast), item.key);
    } else {
      const e = item.embed;
      const lateral = ident(e.lateral);
      // An embed without columns (`clients!inner()`) only filters: joined, never shown.
      if (isEmpty(e.node)) continue;
      if (e.spread) {
        for (const col of spreadColumns(e.node)) {
          const v = sql`${lateral}.${ident(col.key)}`;
          if (!e.toOne) plain(sql`coalesce(${v}, ${EMPTY_JSON_ARRAY})`, col.key, true);
          else if (col.aggregate && !options.lift)
            aggregate(aggregateSql(col.aggregate.fn, v, col.aggregate.cast), col.key);
          else if (col.count && !options.lift) aggregate(aggregateSql('count', v, col.count.cast), col.key);
          else plain(v, col.key, col.json);
        }
      } else {
        const value = sql`${lateral}.${ident(e.key)}`;
        plain(e.toOne ? value : sql`coalesce(${value}, ${EMPTY_JSON_ARRAY})`, e.key, true);
      }
    }
  }
  const aggregated = outputs.some((o) => !o.plain && o.star === undefined);
  const shown = outputs.filter((o) => o.star !== (aggregated ? 'row' : 'column'));
  const sqlOf = (o: (typeof outputs)[number]) => (aggregated && o.json ? sql`(${o.sql})::jsonb` : o.sql);
  const select = shown.map((o) => (o.key === undefined ? o.sql : sql`${sqlOf(o)} AS ${ident(o.key)}`));
  const groups = aggregated ? outputs.filter((o) => o.plain).map(sqlOf) : [];
  for (const e of node.embeds) joins.push(embedJoin(e, row, options.budget));
  const where = [
    ...tenantSql(node, row),
    ...(options.extraWhere ?? []),
    ...node.conditions.map((c) => conditionSql(c, row)),
  ];
  const order = node.order.map((o) => orderSql(o, row));
  let orderLimit = order.length > 0 ? sql` ORDER BY ${join(order)}` : sql``;
  if (node.limit !== undefined) orderLimit = sql`${orderLimit} LIMIT ${count(node.limit)}`;
  if (node.offset !== undefined && node.offset > 0)
    orderLimit = sql`${orderLimit} OFFSET ${text(String(node.offset))}::int8`;
  return {
    select: join(select), // none at all: a row without columns, {} in JSON
    fromWhere: sql`${from}${join(
      joins.map((j) => sql` ${j}`),
      sql``,
    )}${where.length > 0 ? sql` WHERE ${join(where, sql` AND `)}` : sql``}`,
    groupBy: groups.length > 0 ? sql` GROUP BY ${join(groups)}` : sql``,
    orderLimit,
  };
}

/** One ORDER BY term: a field of the row, of a to-one embed's row, or a column a spread lifts. */
function orderSql(o: PlanOrder, row: RowRef): Fragment {
  const expr =
    o.kind === 'lifted'
      ? sql`${ident(o.embed.lateral)}.${ident(o.key)}`
      : o.via
        ? viaSql(o.via, o.expr, row)
        : fieldSql(o.expr, row);
  const direction = o.direction === 'asc' ? sql` ASC` : o.direction === 'desc' ? sql` DESC` : sql``;
  const nulls = o.nulls === 'first' ? sql` NULLS FIRST` : o.nulls === 'last' ? sql` NULLS LAST` : sql``;
  return sql`${expr}${direction}${nulls}`;
}

/** The i-th column of a relationship's column list: its lists pair up, column for column. */
const paired = (columns: string[], i: number): string => defined(columns[i], 'a column of a relationship pair');

/** The join conditions tying an embedded row (alias `child`) to its parent row. */
function link(e: Embed, child: string, parent: RowRef): { join: Fragment; where: Fragment[] } {
  const r = e.relationship;
  if (!r.junction) {
    return {
      join: sql``,
      where: r.targetColumns.map(
        (c, i) => sql`${ident(child)}.${ident(c)} = ${parent.col(paired(r.sourceColumns, i))}`,
      ),
    };
  }
  const j = e.junctionAlias!;
  const on = r.junction.junctionTargetColumns.map(
    (c, i) => sql`${ident(j)}.${ident(c)} = ${ident(child)}.${ident(paired(r.targetColumns, i))}`,
  );
  return {
    join: sql` JOIN ${qualified(r.junction.relation.schema, r.junction.relation.name)} AS ${ident(j)} ON ${join(on, sql` AND `)}`,
    where: r.junction.junctionSourceColumns.map(
      (c, i) => sql`${ident(j)}.${ident(c)} = ${parent.col(paired(r.sourceColumns, i))}`,
    ),
  };
}

/** Where an embedded row comes from: its relation, or the function of a computed relationship. */
function embedSource(e: Embed, parent: RowRef): Fragment {
  const fn = e.relationship.computed;
  return fn
    ? sql`${qualified(fn.schema, fn.name)}(${parent.row()})`
    : qualified(e.node.relation.schema, e.node.relation.name);
}

const T = ident('pgrst_t');
/** A row's JSON (or the text it adds to the body: BodyShape), made once, then counted and aggregated. */
const J = ident('pgrst_j');

function embedJoin(e: Embed, parent: RowRef, budget: Budget | undefined): Fragment {
  const child = e.node;
  const l = link(e, child.alias, parent);
  const from = sql`FROM ${embedSource(e, parent)} AS ${ident(child.alias)}${l.join}`;
  const compiled = compileNode(child, aliasRow(child.alias, child.relation), from, {
    extraWhere: l.where,
    lift: e.spread && e.toOne,
    budget: budget && { ...budget, level: budget.level + 1 },
  });
  const sub = sql`SELECT ${compiled.select} ${compiled.fromWhere}${compiled.groupBy}${compiled.orderLimit}`;
  const level = budget && { ...budget, level: budget.level + 1 };
  let lateral: Fragment;
  let present: Fragment; // a value that is NULL when nothing was embedded
  if (e.spread && e.toOne) {
    // The child's row itself: the parent reads its columns (and aggregates them), and counts them.
    lateral = sql`LATERAL (${sub}) AS ${ident(e.lateral)}`;
    present = sql`TRUE`;
  } else if (e.spread) {
    // PostgREST 13: a to-many spread gives one array per column; each row counts its JSON.
    const cols = spreadColumns(child).map((c) => sql`pg_catalog.json_agg(${T}.${ident(c.key)}) AS ${ident(c.key)}`);
    const counted = level
      ? sql` WHERE ${withinBudget(level, sql`pg_catalog.octet_length(pg_catalog.row_to_json(${T})::text)`)}`
      : sql``;
    lateral = sql`LATERAL (SELECT ${join(cols)}, pg_catalog.count(*) AS "pgrst_n" FROM (${sub}) AS ${T}${counted}) AS ${ident(e.lateral)}`;
    present = sql`${ident(e.lateral)}."pgrst_n" > 0`;
  } else {
    // Each embedded row is made JSON once, and counts that JSON's bytes against its level's
    // budget as its parent's value takes it: where Postgres makes a nested embed's value once
    // and reuses it (Materialize, Memoize), every use counts, at the level that uses it. OFFSET 0
    // keeps the JSON a column of its own subquery, made once for the count and the value.
    const json = sql`SELECT pg_catalog.row_to_json(${T}) AS ${J} FROM (${sub}) AS ${T}${level ? sql` OFFSET 0` : sql``}`;
    const counted = level ? sql` WHERE ${withinBudget(level, sql`pg_catalog.octet_length(${J}::text)`)}` : sql``;
    const agg = e.toOne ? J : sql`pg_catalog.json_agg(${J})`;
    lateral = sql`LATERAL (SELECT ${agg} AS ${ident(e.key)} FROM (${json}) AS ${T}${counted}) AS ${ident(e.lateral)}`;
    present = sql`${ident(e.lateral)}.${ident(e.key)} IS NOT NULL`;
  }
  if (!e.inner) return sql`LEFT JOIN ${lateral} ON TRUE`;
  return e.toOne ? sql`JOIN ${lateral} ON TRUE` : sql`JOIN ${lateral} ON ${present}`;
}

/** A column of a to-one embedded row, for ORDER BY: a scalar sub-select through the relationship. */
function viaSql(e: Embed, expr: Parameters<typeof fieldSql>[0], parent: RowRef): Fragment {
  const alias = `${e.node.alias}_o`;
  const l = link(e, alias, parent);
  const conditions = [...tenantSql(e.node, aliasRow(alias, e.node.relation)), ...l.where];
  const where = conditions.length > 0 ? sql` WHERE ${join(conditions, sql` AND `)}` : sql``;
  return sql`(SELECT ${fieldSql(expr, aliasRow(alias, e.node.relation))} FROM ${embedSource(e, parent)} AS ${ident(alias)}${l.join}${where} LIMIT 1)`;
}

/** One row of pgrst_rows, as the body's expressions name it. */
const ROW = sql`"_postgrest_t"`;

/**
 * How rows become a body: the text one row (`_postgrest_t`) adds to it, what goes between two
 * rows' texts, and the body made of the texts (column J of each row).
 */
export interface BodyShape {
  row: Fragment;
  separator: Fragment;
  /** The separator's bytes, which each row counts. */
  separatorBytes: Fragment;
  body: Fragment;
}

/** The rows' texts joined by the separator. */
const joined = (separator: Fragment) => sql`coalesce(pg_catalog.string_agg(${J}, ${separator}), '')`;

/**
 * A body of rows: JSON (an array, or one object or null), nulls stripped where asked; CSV
 * (PostgREST's: a header from the first row's keys, then each row's record text); or GeoJSON
 * (PostGIS's ST_AsGeoJSON(record), which takes the row's first geometry column as the geometry
 * and the others as properties; 22023 "geometry column is missing" without one). Between two
 * rows: json_agg's separator between records (so a body is PostgREST's byte for byte),
 * json_strip_nulls's (each row stripped is the array stripped), a line break, json_agg's between
 * json values. ST_AsGeoJSON is unqualified, as the one function the engine does not own: PostGIS
 * lives in whichever schema it was created in, found through the transaction's search_path
 * (the exposed schema and the extra search path); without PostGIS, 42883.
 */
export function rowsShape({ media, stripNulls }: Output): BodyShape {
  if (media === 'csv') {
    const header = sql`(SELECT coalesce(pg_catalog.string_agg(a.k, ','), '') FROM (SELECT pg_catalog.json_object_keys(r)::text AS k FROM (SELECT pg_catalog.row_to_json(hh) AS r FROM pgrst_rows AS hh LIMIT 1) s) a)`;
    const separator = sql`E'\\n'`;
    return {
      row: sql`substring(${ROW}::text, 2, length(${ROW}::text) - 2)`,
      separator,
      separatorBytes: sql`1`,
      body: sql`${header} || E'\\n' || ${joined(separator)}`,
    };
  }
  if (media === 'geojson') {
    return {
      row: sql`ST_AsGeoJSON(${ROW})::text`,
      separator: sql`', '`,
      separatorBytes: sql`2`,
      body: sql`pg_catalog.json_build_object('type', 'FeatureCollection', 'features', coalesce(pg_catalog.json_agg(${J}::json), '[]'))::text`,
    };
  }
  const json = sql`pg_catalog.row_to_json(${ROW})`;
  return jsonShape(
    stripNulls ? sql`pg_catalog.json_strip_nulls(${json})::text` : sql`${json}::text`,
    stripNulls ? { sql: sql`','`, bytes: sql`1` } : { sql: sql`E', \\n '`, bytes: sql`4` },
    media === 'object',
  );
}

/** Rows' JSON texts as a JSON array, or as the one object (null for none) of a singular answer. */
function jsonShape(row: Fragment, separator: { sql: Fragment; bytes: Fragment }, single: boolean): BodyShape {
  return {
    row,
    separator: separator.sql,
    separatorBytes: separator.bytes,
    body: single ? sql`coalesce((pg_catalog.array_agg(${J}))[1], 'null')` : sql`'[' || ${joined(separator.sql)} || ']'`,
  };
}

/** A function's scalar results (column pgrst_scalar) as one JSON value, or an array of them. */
export function scalarShape(setOf: boolean): BodyShape {
  const value = sql`coalesce(pg_catalog.to_json(${ROW}."pgrst_scalar")::text, 'null')`;
  return jsonShape(value, { sql: sql`', '`, bytes: sql`2` }, !setOf);
}

/**
 * The body of the rows of pgrst_rows, and the FROM it is aggregated over: each row as the text
 * it adds to the body, made once, and counted against the budget (when there is one) as the
 * body takes it. The count is of the very bytes sent, not of Postgres's storage: a compressed
 * value counts as written out, an escaped character as its escape. OFFSET 0 keeps the texts a
 * subquery of their own, so each is made once (pulled up, the count and the body would each
 * make it).
 */
export function sentBody(s: BodyShape, budget: Budget | undefined): { from: Fragment; body: Fragment } {
  const texts = sql`SELECT ${s.row} AS ${J} FROM pgrst_rows AS ${ROW}`;
  if (!budget) return { from: sql`FROM (${texts}) AS "pgrst_body"`, body: s.body };
  const counted = withinBudget(budget, sql`pg_catalog.octet_length(${J}) + ${s.separatorBytes}`);
  return { from: sql`FROM (${texts} OFFSET 0) AS "pgrst_body" WHERE ${counted}`, body: s.body };
}

/** A statement the execute stage runs: compiled, its parameters numbered once. */
export type Statement = CompiledSql;

export interface ReadStatements {
  main: Statement;
  /** EXPLAIN of the count, for count=planned|estimated: its own text and its own parameters. */
  explain?: Statement;
}

/**
 * The bound of one read's cost in Postgres and in the server's memory. Postgres builds a read's
 * whole body in memory before it sends it, and neither work_mem nor the planner bounds that: the
 * planner costed embeds nested through one category (25 million rows, a gigabyte of one
 * backend's memory) below a plain read of 5,000 rows. So the bound counts while Postgres builds.
 */
export interface ReadBounds {
  /**
   * Bytes a read's body may have. While it is built, every top-level row and every embedded row
   * counts the bytes of its JSON (or CSV line) against it, as they will be sent (a compressed
   * value whole, an escaped character as its escape), per level of embedding, and the statement
   * stops with BYTE_BUDGET_ERROR (errors/translate.ts) at the first row past it, so Postgres never holds
   * much more than the bound of one level's values. What the rows' count leaves out (the
   * brackets, a CSV header) is checked by the response stage (response/index.ts).
   */
  maxResponseBytes?: number;
}

/** The bound of a read's body, and the level of embedding (0: the top rows) a count is for. */
export interface Budget {
  max: number;
  level: number;
}

/** The budget of a read's top rows, or none. */
export const topBudget = (bounds: ReadBounds): Budget | undefined =>
  bounds.maxResponseBytes === undefined ? undefined : { max: bounds.maxResponseBytes, level: 0 };

/**
 * A condition that counts `size` bytes against its level's budget: true, or the statement fails.
 * Each level counts apart, in a transaction-local setting of its own (so each starts at zero in
 * every transaction): what one level takes in all is at most about the body's size, where one
 * count for all levels would count a nested value again at every level above it. Built-in
 * functions only: the engine serves databases it has no functions in. Past `max` it fails the
 * statement with a bigint cast of "pgrst read bytes N over MAX" (errors/translate.ts recognises it), which
 * reads the setting (a stable function), so the planner cannot fold it into an error.
 */
function withinBudget({ max, level }: Budget, size: Fragment): Fragment {
  const limit = text(String(max));
  const name = text(`pgrst.read_bytes_${level}`);
  return sql`CASE WHEN pg_catalog.set_config(${name}, (coalesce(nullif(pg_catalog.current_setting(${name}, true), ''), '0')::int8 + coalesce(${size}, 0))::text, true)::int8 <= ${limit}::int8 THEN TRUE ELSE ('pgrst read bytes ' || pg_catalog.current_setting(${name}) || ' over ' || ${limit})::int8 < 0 END`;
}

export const ESTIMATE_THRESHOLD = 10_000;
/** ESTIMATE_THRESHOLD + 1: counting one row more tells "more than the threshold". */
const ESTIMATE_LIMIT = sql`10001`;

/**
 * Where the root's rows come from other than its relation: a function call (query/routine.ts).
 * `with` is a CTE the FROM refers to; `single` makes the body one object (a function that
 * returns one row, not a set).
 */
export interface RowSource {
  with?: Fragment;
  from: Fragment;
  single?: boolean;
}

export function readStatement(
  root: ReadNode,
  output: Output,
  count: 'exact' | 'planned' | 'estimated' | undefined,
  source?: RowSource,
  bounds: ReadBounds = {},
): ReadStatements {
  const rel = root.relation;
  const from = source ? source.from : sql`FROM ${qualified(rel.schema, rel.name)} AS ${ident(root.alias)}`;
  const budget = topBudget(bounds);
  // A function's rows are not read from a table: the function says where they come from.
  const c = compileNode(source ? { ...root, tenant: undefined } : root, aliasRow(root.alias, rel), from, { budget });
  // Postgres's statistics describe every tenant's rows: an estimate for one tenant's read would
  // tell it about the others (a table's size, the average size of the other tenants). Its
  // planned and estimated counts are exact, which costs what count=exact costs it anyway.
  if (!source && root.tenant && (count === 'planned' || count === 'estimated')) count = 'exact';
  // With GROUP BY, the count is of groups, as the body has them.
  const counted = c.groupBy.empty ? c.fromWhere : sql`FROM (SELECT 1 ${c.fromWhere}${c.groupBy}) AS "pgrst_g"`;
  const countSql =
    count === 'exact'
      ? sql`(SELECT pg_catalog.count(*) ${counted})`
      : count === 'estimated'
        ? sql`(SELECT pg_catalog.count(*) FROM (SELECT 1 ${c.fromWhere}${c.groupBy} LIMIT ${ESTIMATE_LIMIT}) AS "pgrst_e")`
        : sql`NULL`;
  const media = source?.single && output.media === 'json' ? { ...output, media: 'object' as const } : output;
  const withSource = source?.with ? sql`${source.with}, ` : sql``;
  const rows = sql`pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}${c.groupBy}${c.orderLimit})`;
  const sent = sentBody(rowsShape(media), budget);
  const main = sql`WITH ${withSource}${rows} SELECT ${countSql}::text AS total_result_set, pg_catalog.count(*)::int AS page_total, ${sent.body} AS body, ${RESPONSE_COLUMNS} ${sent.from}`;
  const out: ReadStatements = { main: compile(main) };
  if (count === 'planned' || count === 'estimated') {
    const explainWith = source?.with ? sql`WITH ${source.with} ` : sql``;
    out.explain = compile(sql`EXPLAIN (FORMAT JSON) ${explainWith}SELECT 1 ${c.fromWhere}${c.groupBy}`);
  }
  return out;
}
