// Read statements (PostgREST's QueryBuilder): a ReadNode tree compiled to one SELECT whose
// JSON body Postgres itself writes (json_agg), with embeds as lateral joins.

import type { Embed, ReadNode } from '../plan/types.js';
import type { MediaType } from '../request/types.js';
import { aliasRow, conditionSql, fieldSql, ident, Params, qualified, type RowRef } from './sql.js';

export interface CompiledNode {
  select: string;
  /** FROM … joins … WHERE …, without order and limit: shared by the page and the count. */
  fromWhere: string;
  orderLimit: string;
}

/** The parts of a node's SELECT, for a row reached through `row` (its own alias in reads). */
export function compileNode(node: ReadNode, row: RowRef, from: string, p: Params, extraWhere: string[] = []): CompiledNode {
  const select: string[] = [];
  const joins: string[] = [];
  for (const item of node.select) {
    if (item.kind === 'star') select.push(row.star());
    else if (item.kind === 'field') select.push(`${fieldSql(item.expr, row, p)} AS ${ident(item.key)}`);
    else {
      const e = item.embed;
      const value = `${ident(e.lateral)}.${ident(e.key)}`;
      select.push(e.toOne ? `${value} AS ${ident(e.key)}` : `coalesce(${value}, '[]'::json) AS ${ident(e.key)}`);
    }
  }
  for (const e of node.embeds) joins.push(embedJoin(e, row, p));
  const where = [...extraWhere, ...node.conditions.map((c) => conditionSql(c, row, p))];
  const order = node.order.map((o) => {
    const expr = o.via ? viaSql(o.via, o.expr, row, p) : fieldSql(o.expr, row, p);
    return `${expr}${o.direction ? ' ' + o.direction.toUpperCase() : ''}${o.nulls ? ` NULLS ${o.nulls.toUpperCase()}` : ''}`;
  });
  let orderLimit = order.length > 0 ? ` ORDER BY ${order.join(', ')}` : '';
  if (node.limit !== undefined) orderLimit += ` LIMIT ${p.text(String(node.limit))}::int8`;
  if (node.offset !== undefined && node.offset > 0) orderLimit += ` OFFSET ${p.text(String(node.offset))}::int8`;
  return {
    select: select.length > 0 ? select.join(', ') : 'NULL AS "pgrst_none"',
    fromWhere: `${from}${joins.map((j) => ' ' + j).join('')}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}`,
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

function embedJoin(e: Embed, parent: RowRef, p: Params): string {
  const child = e.node;
  const rel = child.relation;
  const l = link(e, child.alias, parent);
  const compiled = compileNode(child, aliasRow(child.alias), `FROM ${qualified(rel.schema, rel.name)} AS ${ident(child.alias)}${l.join}`, p, l.where);
  const sub = `SELECT ${compiled.select} ${compiled.fromWhere}${compiled.orderLimit}`;
  const agg = e.toOne ? 'pg_catalog.row_to_json("pgrst_t")' : 'pg_catalog.json_agg("pgrst_t")';
  const lateral = `LATERAL (SELECT ${agg} AS ${ident(e.key)} FROM (${sub}) AS "pgrst_t") AS ${ident(e.lateral)}`;
  if (!e.inner) return `LEFT JOIN ${lateral} ON TRUE`;
  return e.toOne ? `JOIN ${lateral} ON TRUE` : `JOIN ${lateral} ON ${ident(e.lateral)}.${ident(e.key)} IS NOT NULL`;
}

/** A column of a to-one embedded row, for ORDER BY: a scalar sub-select through the relationship. */
function viaSql(e: Embed, expr: Parameters<typeof fieldSql>[0], parent: RowRef, p: Params): string {
  const alias = `${e.node.alias}_o`;
  const l = link(e, alias, parent);
  const rel = e.node.relation;
  return `(SELECT ${fieldSql(expr, aliasRow(alias), p)} FROM ${qualified(rel.schema, rel.name)} AS ${ident(alias)}${l.join} WHERE ${l.where.join(' AND ')} LIMIT 1)`;
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

export function readStatement(root: ReadNode, media: MediaType, count: 'exact' | 'planned' | 'estimated' | undefined): ReadStatements {
  const p = new Params();
  const rel = root.relation;
  const c = compileNode(root, aliasRow(root.alias), `FROM ${qualified(rel.schema, rel.name)} AS ${ident(root.alias)}`, p);
  const countSql = count === 'exact' ? `(SELECT pg_catalog.count(*) ${c.fromWhere})`
    : count === 'estimated' ? `(SELECT pg_catalog.count(*) FROM (SELECT 1 ${c.fromWhere} LIMIT ${ESTIMATE_THRESHOLD + 1}) AS "pgrst_e")`
      : 'NULL';
  const text = `WITH pgrst_rows AS (SELECT ${c.select} ${c.fromWhere}${c.orderLimit}) `
    + `SELECT ${countSql}::text AS total_result_set, pg_catalog.count("_postgrest_t")::int AS page_total, ${bodySql(media)} AS body `
    + `FROM pgrst_rows AS "_postgrest_t"`;
  const out: ReadStatements = { main: { text, params: p.values } };
  if (count === 'planned' || count === 'estimated') out.explain = { text: `EXPLAIN (FORMAT JSON) SELECT 1 ${c.fromWhere}`, params: p.values };
  return out;
}
