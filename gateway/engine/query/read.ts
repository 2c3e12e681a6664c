// Read statements (PostgREST's QueryBuilder): a ReadNode tree compiled to one SELECT whose
// JSON body Postgres itself writes (json_agg), with embeds as lateral joins.

import {
  catalog,
  claim,
  compile,
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
  if (node.limit !== undefined) orderLimit = sql`${orderLimit} LIMIT ${text(String(node.limit))}::int8`;
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
  // Each embedded row counts against its level's budget as its parent's value takes it: where
  // Postgres makes a nested embed's value once and reuses it (Materialize, Memoize), every use
  // counts, at the level that uses it.
  const counted = budget
    ? sql` WHERE ${withinBudget({ ...budget, level: budget.level + 1 }, sql`pg_catalog.pg_column_size(${T})`)}`
    : sql``;
  let lateral: Fragment;
  let present: Fragment; // a value that is NULL when nothing was embedded
  if (e.spread && e.toOne) {
    // The child's row itself: the parent reads its columns (and aggregates them), and counts them.
    lateral = sql`LATERAL (${sub}) AS ${ident(e.lateral)}`;
    present = sql`TRUE`;
  } else if (e.spread) {
    // PostgREST 13: a to-many spread gives one array per column.
    const cols = spreadColumns(child).map((c) => sql`pg_catalog.json_agg(${T}.${ident(c.key)}) AS ${ident(c.key)}`);
    lateral = sql`LATERAL (SELECT ${join(cols)}, pg_catalog.count(*) AS "pgrst_n" FROM (${sub}) AS ${T}${counted}) AS ${ident(e.lateral)}`;
    present = sql`${ident(e.lateral)}."pgrst_n" > 0`;
  } else {
    const agg = e.toOne ? sql`pg_catalog.row_to_json(${T})` : sql`pg_catalog.json_agg(${T})`;
    lateral = sql`LATERAL (SELECT ${agg} AS ${ident(e.key)} FROM (${sub}) AS ${T}${counted}) AS ${ident(e.lateral)}`;
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

/**
 * The body expression over the rows of `_postgrest_t`, as Postgres's own text. Stripped nulls
 * leave out every null field, in embedded rows too, as PostgREST's json_strip_nulls does.
 */
export function bodySql({ media, stripNulls }: Output): Fragment {
  const rows = stripNulls
    ? sql`pg_catalog.json_strip_nulls(pg_catalog.json_agg("_postgrest_t"))`
    : sql`pg_catalog.json_agg("_postgrest_t")`;
  switch (media) {
    case 'json':
      return sql`coalesce(${rows}, '[]')::text`;
    case 'object':
      return sql`coalesce((${rows} -> 0)::text, 'null')`;
    case 'csv':
      // PostgREST's CSV: a header from the first row's keys, then each row's record text.
      return sql`(SELECT coalesce(pg_catalog.string_agg(a.k, ','), '') FROM (SELECT pg_catalog.json_object_keys(r)::text AS k FROM (SELECT pg_catalog.row_to_json(hh) AS r FROM pgrst_rows AS hh LIMIT 1) s) a) || E'\\n' || coalesce(pg_catalog.string_agg(substring("_postgrest_t"::text, 2, length("_postgrest_t"::text) - 2), E'\\n'), '')`;
    case 'geojson':
      // PostgREST's GeoJSON: a FeatureCollection of PostGIS's ST_AsGeoJSON(record), which takes
      // the row's first geometry column as the geometry and the others as properties (22023
      // "geometry column is missing" without one). Unqualified, as the one function the engine
      // does not own: PostGIS lives in whichever schema it was created in, found through the
      // transaction's search_path (the exposed schema and the extra search path); without
      // PostGIS, 42883.
      return sql`pg_catalog.json_build_object('type', 'FeatureCollection', 'features', coalesce(pg_catalog.json_agg(ST_AsGeoJSON("_postgrest_t")::json), '[]'))::text`;
  }
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
   * counts its size (Postgres's, before JSON) against it, per level of embedding, and the
   * statement stops with BYTE_BUDGET_ERROR (errors.ts) past it; a finished body over it does not leave Postgres, only
   * its size (body_bytes), refused by the response stage (response/index.ts).
   */
  maxResponseBytes?: number;
}

/** The bound of a read's body, and the level of embedding (0: the top rows) a count is for. */
interface Budget {
  max: number;
  level: number;
}

/**
 * A condition that counts `size` bytes against its level's budget: true, or the statement fails.
 * Each level counts apart, in a transaction-local setting of its own (so each starts at zero in
 * every transaction): what one level takes in all is at most about the body's size, where one
 * count for all levels would count a nested value again at every level above it. Built-in
 * functions only: the engine serves databases it has no functions in. Past `max` it fails the
 * statement with a bigint cast of "pgrst read bytes N over MAX" (errors.ts recognises it), which
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
  const budget = bounds.maxResponseBytes === undefined ? undefined : { max: bounds.maxResponseBytes, level: 0 };
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
  const body = bodySql(source?.single && output.media === 'json' ? { ...output, media: 'object' } : output);
  const withSource = source?.with ? sql`${source.with}, ` : sql``;
  const rows = sql`pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}${c.groupBy}${c.orderLimit})`;
  // Each row counts against the budget as the body takes it.
  const perRow = budget ? sql` WHERE ${withinBudget(budget, sql`pg_catalog.pg_column_size("_postgrest_t")`)}` : sql``;
  const result = sql`SELECT ${countSql}::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ${body} AS body FROM pgrst_rows AS "_postgrest_t"${perRow}`;
  // A body over maxResponseBytes (its JSON can be larger than the sizes counted) does not leave
  // Postgres, only its size: the server never holds it.
  const bounded =
    bounds.maxResponseBytes === undefined
      ? result
      : sql`SELECT total_result_set, page_total, CASE WHEN pg_catalog.octet_length(body) <= ${text(String(bounds.maxResponseBytes))}::int8 THEN body END AS body, pg_catalog.octet_length(body) AS body_bytes FROM (${result}) AS "pgrst_out"`;
  const main = sql`WITH ${withSource}${rows} ${bounded}`;
  const out: ReadStatements = { main: compile(main) };
  if (count === 'planned' || count === 'estimated') {
    const explainWith = source?.with ? sql`WITH ${source.with} ` : sql``;
    out.explain = compile(sql`EXPLAIN (FORMAT JSON) ${explainWith}SELECT 1 ${c.fromWhere}${c.groupBy}`);
  }
  return out;
}
