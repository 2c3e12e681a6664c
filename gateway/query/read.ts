// Read statements (PostgREST's QueryBuilder): a ReadNode tree compiled to one SELECT whose
// JSON body Postgres itself writes (json_agg), with embeds as lateral joins.

import type { Aggregate, Embed, ReadNode } from '../plan/types.js';
import type { MediaType } from '../request/types.js';
import { aliasRow, conditionSql, fieldSql, ident, outputSql, Params, qualified, type RowRef } from './sql.js';

export interface CompiledNode {
  select: string;
  /** FROM … joins … WHERE …, without order and limit: shared by the page and the count. */
  fromWhere: string;
  /** GROUP BY the non-aggregated outputs, when the node aggregates; else ''. */
  groupBy: string;
  orderLimit: string;
}

export interface CompileOptions {
  extraWhere?: string[];
  /**
   * A to-one spread child: its aggregates are applied by the parent (PostgREST treats a spread
   * resource's columns as the parent's), so the child yields their raw inputs.
   */
  lift?: boolean;
}

/** A column a spread embed lifts into its parent, with the aggregate the parent applies. */
interface SpreadColumn {
  key: string;
  aggregate?: Aggregate;
  count?: { cast?: string };
}

function spreadColumns(node: ReadNode): SpreadColumn[] {
  return node.select.flatMap((item): SpreadColumn[] => {
    if (item.kind === 'star') return node.relation.columnList.map((c) => ({ key: c.name }));
    if (item.kind === 'field') return [{ key: item.key, aggregate: item.aggregate }];
    if (item.kind === 'count') return [{ key: item.key, count: { cast: item.cast } }];
    return item.embed.spread ? spreadColumns(item.embed.node) : [{ key: item.embed.key }];
  });
}

function aggregateSql(fn: string, arg: string | undefined, cast: string | undefined): string {
  const sql = arg === undefined ? 'pg_catalog.count(*)' : `pg_catalog.${fn}(${arg})`;
  return cast ? `CAST(${sql} AS ${cast})` : sql;
}

/** A node that selects no column, at any depth: PostgREST leaves such an embed out of the output. */
function isEmpty(node: ReadNode): boolean {
  return node.select.every((item) => item.kind === 'embed' && isEmpty(item.embed.node));
}

/** The parts of a node's SELECT, for a row reached through `row` (its own alias in reads). */
export function compileNode(node: ReadNode, row: RowRef, from: string, p: Params, options: CompileOptions = {}): CompiledNode {
  // Outputs in order; plain ones are the grouping keys when any output aggregates. json values
  // (embeds) have no equality operator, so an aggregating node groups them as jsonb.
  const outputs: { sql: string; key?: string; plain: boolean; json?: boolean; star?: 'row' | 'column' }[] = [];
  const plain = (sql: string, key: string, json = false) => outputs.push({ sql, key, plain: true, json });
  const aggregate = (sql: string, key: string) => outputs.push({ sql, key, plain: false });
  const joins: string[] = [];
  for (const item of node.select) {
    if (item.kind === 'star') {
      // `alias.*`, or its columns one by one when they become grouping keys or some column has
      // a data representation.
      if (node.relation.columnList.some((c) => c.representation?.toJson)) {
        for (const c of node.relation.columnList) {
          plain(c.representation?.toJson ? `${c.representation.toJson}(${row.col(c.name)})` : row.col(c.name), c.name);
        }
        continue;
      }
      outputs.push({ sql: row.star(), plain: false, star: 'row' });
      for (const c of node.relation.columnList) outputs.push({ sql: row.col(c.name), key: c.name, plain: true, star: 'column' });
    } else if (item.kind === 'field') {
      if (item.aggregate && !options.lift) aggregate(aggregateSql(item.aggregate.fn, fieldSql(item.expr, row, p), item.aggregate.cast), item.key);
      else plain(item.aggregate ? fieldSql(item.expr, row, p) : outputSql(item.expr, row, p), item.key);
    } else if (item.kind === 'count') {
      if (options.lift) plain('1', item.key);
      else aggregate(aggregateSql('count', undefined, item.cast), item.key);
    } else {
      const e = item.embed;
      const lateral = ident(e.lateral);
      // An embed without columns (`clients!inner()`) only filters: joined, never shown.
      if (isEmpty(e.node)) continue;
      if (e.spread) {
        for (const col of spreadColumns(e.node)) {
          const v = `${lateral}.${ident(col.key)}`;
          if (!e.toOne) plain(`coalesce(${v}, '[]'::json)`, col.key, true);
          else if (col.aggregate && !options.lift) aggregate(aggregateSql(col.aggregate.fn, v, col.aggregate.cast), col.key);
          else if (col.count && !options.lift) aggregate(aggregateSql('count', v, col.count.cast), col.key);
          else plain(v, col.key);
        }
      } else {
        const value = `${lateral}.${ident(e.key)}`;
        plain(e.toOne ? value : `coalesce(${value}, '[]'::json)`, e.key, true);
      }
    }
  }
  const aggregated = outputs.some((o) => !o.plain && o.star === undefined);
  const shown = outputs.filter((o) => o.star !== (aggregated ? 'row' : 'column'));
  const sqlOf = (o: (typeof outputs)[number]) => (aggregated && o.json ? `(${o.sql})::jsonb` : o.sql);
  const select = shown.map((o) => (o.key === undefined ? o.sql : `${sqlOf(o)} AS ${ident(o.key)}`));
  const groups = aggregated ? outputs.filter((o) => o.plain).map(sqlOf) : [];
  for (const e of node.embeds) joins.push(embedJoin(e, row, p));
  const where = [...(options.extraWhere ?? []), ...node.conditions.map((c) => conditionSql(c, row, p))];
  const order = node.order.map((o) => {
    const expr = o.via ? viaSql(o.via, o.expr, row, p) : fieldSql(o.expr, row, p);
    return `${expr}${o.direction ? ' ' + o.direction.toUpperCase() : ''}${o.nulls ? ` NULLS ${o.nulls.toUpperCase()}` : ''}`;
  });
  let orderLimit = order.length > 0 ? ` ORDER BY ${order.join(', ')}` : '';
  if (node.limit !== undefined) orderLimit += ` LIMIT ${p.text(String(node.limit))}::int8`;
  if (node.offset !== undefined && node.offset > 0) orderLimit += ` OFFSET ${p.text(String(node.offset))}::int8`;
  return {
    select: select.join(', '), // none at all: a row without columns, {} in JSON
    fromWhere: `${from}${joins.map((j) => ' ' + j).join('')}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}`,
    groupBy: groups.length > 0 ? ` GROUP BY ${groups.join(', ')}` : '',
    orderLimit,
  };
}

/** The join conditions tying an embedded row (alias `child`) to its parent row. */
function link(e: Embed, child: string, parent: RowRef): { join: string; where: string[] } {
  const r = e.relationship;
  if (!r.junction) {
    return { join: '', where: r.targetColumns.map((c, i) => `${ident(child)}.${ident(c)} = ${parent.col(r.sourceColumns[i])}`) };
  }
  const j = e.junctionAlias!;
  const on = r.junction.junctionTargetColumns.map((c, i) => `${ident(j)}.${ident(c)} = ${ident(child)}.${ident(r.targetColumns[i])}`);
  return {
    join: ` JOIN ${qualified(r.junction.relation.schema, r.junction.relation.name)} AS ${ident(j)} ON ${on.join(' AND ')}`,
    where: r.junction.junctionSourceColumns.map((c, i) => `${ident(j)}.${ident(c)} = ${parent.col(r.sourceColumns[i])}`),
  };
}

/** Where an embedded row comes from: its relation, or the function of a computed relationship. */
function embedSource(e: Embed, parent: RowRef): string {
  const fn = e.relationship.computed;
  return fn ? `${qualified(fn.schema, fn.name)}(${parent.row()})` : qualified(e.node.relation.schema, e.node.relation.name);
}

function embedJoin(e: Embed, parent: RowRef, p: Params): string {
  const child = e.node;
  const l = link(e, child.alias, parent);
  const from = `FROM ${embedSource(e, parent)} AS ${ident(child.alias)}${l.join}`;
  const compiled = compileNode(child, aliasRow(child.alias), from, p, { extraWhere: l.where, lift: e.spread && e.toOne });
  const sub = `SELECT ${compiled.select} ${compiled.fromWhere}${compiled.groupBy}${compiled.orderLimit}`;
  let lateral: string;
  let present: string; // a value that is NULL when nothing was embedded
  if (e.spread && e.toOne) {
    // The child's row itself: the parent reads its columns (and aggregates them).
    lateral = `LATERAL (${sub}) AS ${ident(e.lateral)}`;
    present = 'TRUE';
  } else if (e.spread) {
    // PostgREST 13: a to-many spread gives one array per column.
    const cols = spreadColumns(child).map((c) => `pg_catalog.json_agg("pgrst_t".${ident(c.key)}) AS ${ident(c.key)}`);
    lateral = `LATERAL (SELECT ${cols.join(', ')}, pg_catalog.count(*) AS "pgrst_n" FROM (${sub}) AS "pgrst_t") AS ${ident(e.lateral)}`;
    present = `${ident(e.lateral)}."pgrst_n" > 0`;
  } else {
    const agg = e.toOne ? 'pg_catalog.row_to_json("pgrst_t")' : 'pg_catalog.json_agg("pgrst_t")';
    lateral = `LATERAL (SELECT ${agg} AS ${ident(e.key)} FROM (${sub}) AS "pgrst_t") AS ${ident(e.lateral)}`;
    present = `${ident(e.lateral)}.${ident(e.key)} IS NOT NULL`;
  }
  if (!e.inner) return `LEFT JOIN ${lateral} ON TRUE`;
  return e.toOne ? `JOIN ${lateral} ON TRUE` : `JOIN ${lateral} ON ${present}`;
}

/** A column of a to-one embedded row, for ORDER BY: a scalar sub-select through the relationship. */
function viaSql(e: Embed, expr: Parameters<typeof fieldSql>[0], parent: RowRef, p: Params): string {
  const alias = `${e.node.alias}_o`;
  const l = link(e, alias, parent);
  const where = l.where.length > 0 ? ` WHERE ${l.where.join(' AND ')}` : '';
  return `(SELECT ${fieldSql(expr, aliasRow(alias), p)} FROM ${embedSource(e, parent)} AS ${ident(alias)}${l.join}${where} LIMIT 1)`;
}

/** The body expression over the rows of `_postgrest_t`, as Postgres's own text. */
export function bodySql(media: MediaType): string {
  switch (media) {
    case 'json':
      return `coalesce(pg_catalog.json_agg("_postgrest_t"), '[]')::text`;
    case 'object':
      return `coalesce((pg_catalog.json_agg("_postgrest_t") -> 0)::text, 'null')`;
    case 'csv':
      // PostgREST's CSV: a header from the first row's keys, then each row's record text.
      return `(SELECT coalesce(pg_catalog.string_agg(a.k, ','), '') FROM (SELECT pg_catalog.json_object_keys(r)::text AS k FROM (SELECT pg_catalog.row_to_json(hh) AS r FROM pgrst_rows AS hh LIMIT 1) s) a)`
        + ` || E'\\n' || coalesce(pg_catalog.string_agg(substring("_postgrest_t"::text, 2, length("_postgrest_t"::text) - 2), E'\\n'), '')`;
  }
}

export interface ReadStatements {
  main: { text: string; params: (string | null)[] };
  /** EXPLAIN of the count, for count=planned|estimated. */
  explain?: { text: string; params: (string | null)[] };
}

export const ESTIMATE_THRESHOLD = 10_000;

/**
 * Where the root's rows come from other than its relation: a function call (query/routine.ts).
 * `with` names CTEs the FROM refers to; `single` makes the body one object (a function that
 * returns one row, not a set).
 */
export type RowSource = (p: Params) => { with?: string; from: string; single?: boolean };

export function readStatement(root: ReadNode, media: MediaType, count: 'exact' | 'planned' | 'estimated' | undefined, source?: RowSource): ReadStatements {
  const p = new Params();
  const rel = root.relation;
  const src = source?.(p);
  const from = src ? src.from : `FROM ${qualified(rel.schema, rel.name)} AS ${ident(root.alias)}`;
  const c = compileNode(root, aliasRow(root.alias), from, p);
  // With GROUP BY, the count is of groups, as the body has them.
  const counted = c.groupBy ? `FROM (SELECT 1 ${c.fromWhere}${c.groupBy}) AS "pgrst_g"` : c.fromWhere;
  const countSql = count === 'exact' ? `(SELECT pg_catalog.count(*) ${counted})`
    : count === 'estimated' ? `(SELECT pg_catalog.count(*) FROM (SELECT 1 ${c.fromWhere}${c.groupBy} LIMIT ${ESTIMATE_THRESHOLD + 1}) AS "pgrst_e")`
      : 'NULL';
  const body = src?.single && media === 'json' ? bodySql('object') : bodySql(media);
  const text = `WITH ${src?.with ? `${src.with}, ` : ''}pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}${c.groupBy}${c.orderLimit}) `
    + `SELECT ${countSql}::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ${body} AS body `
    + `FROM pgrst_rows AS "_postgrest_t"`;
  const out: ReadStatements = { main: { text, params: p.values } };
  if (count === 'planned' || count === 'estimated') {
    out.explain = { text: `EXPLAIN (FORMAT JSON) ${src?.with ? `WITH ${src.with} ` : ''}SELECT 1 ${c.fromWhere}${c.groupBy}`, params: p.values };
  }
  return out;
}
