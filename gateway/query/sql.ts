// SQL text is written here and in ./read.ts and ./write.ts only. Identifiers pass through
// ident() and come from the schema cache; client values pass through Params and become $n
// parameters (sent as text, cast in SQL to the type the schema cache names).

import type { FieldExpr, PlanCondition } from '../plan/types.js';
import type { Filter } from '../request/types.js';
import { refuseNul } from '../request/grammar.js';

export function ident(name: string): string {
  refuseNul(name, 'name'); // a last guard: the request parser refuses such names already
  return '"' + name.replace(/"/g, '""') + '"';
}

export function qualified(schema: string, name: string): string {
  return `${ident(schema)}.${ident(name)}`;
}

export class Params {
  readonly values: (string | null)[] = [];
  /** A text parameter: `$n::text`. */
  text(value: string | null): string {
    this.values.push(value);
    return `$${this.values.length}::text`;
  }
  /** A parameter cast from text to a type the schema cache named. */
  typed(value: string | null, typeSql: string): string {
    return `${this.text(value)}::${typeSql}`;
  }
}

/** How a node's row is reached: a table alias in reads, a returned row in writes. */
export interface RowRef {
  col(name: string): string;
  row(): string;
  star(): string;
}

export const aliasRow = (alias: string): RowRef => ({
  col: (name) => `${ident(alias)}.${ident(name)}`,
  row: () => ident(alias),
  star: () => `${ident(alias)}.*`,
});

export function fieldSql(expr: FieldExpr, row: RowRef, p: Params): string {
  let sql = expr.source.kind === 'column'
    ? row.col(expr.source.column.name)
    : `${qualified(expr.source.fn.schema, expr.source.fn.name)}(${row.row()})`;
  // Arrows also reach into arrays and composite values, through their JSON form (as PostgREST).
  const base = expr.source.kind === 'column' ? expr.source.column.baseType : expr.source.fn.baseType;
  const isArray = expr.source.kind === 'column' ? expr.source.column.isArray : expr.source.fn.isArray;
  if (expr.json.length > 0 && (isArray || (base !== 'json' && base !== 'jsonb'))) sql = `pg_catalog.to_jsonb(${sql})`;
  for (const step of expr.json) {
    const key = /^-?\d+$/.test(step.key) ? `${p.text(step.key)}::int4` : p.text(step.key);
    sql = `(${sql}${step.arrow}${key})`;
  }
  if (expr.cast) sql = `CAST(${sql} AS ${expr.cast})`;
  return sql;
}

/** A field as shown in output: through its domain's cast to json when it has one. */
export function outputSql(expr: FieldExpr, row: RowRef, p: Params): string {
  const sql = fieldSql(expr, row, p);
  const toJson = plainColumn(expr)?.representation?.toJson;
  return toJson ? `${toJson}(${sql})` : sql;
}

const plainColumn = (expr: FieldExpr) =>
  expr.source.kind === 'column' && expr.json.length === 0 && expr.cast === undefined ? expr.source.column : undefined;

/** A filter value of the field's type: through its domain's cast from text when it has one. */
function typedValue(p: Params, value: string, expr: FieldExpr): string {
  const fromText = plainColumn(expr)?.representation?.fromText;
  return fromText ? `${fromText}(${p.text(value)})` : p.typed(value, expr.typeSql);
}

const COMPARE: Record<string, string> = { eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const PATTERN: Record<string, string> = { like: 'LIKE', ilike: 'ILIKE', match: '~', imatch: '~*' };
const RANGE_OPS: Record<string, string> = { cs: '@>', cd: '<@', ov: '&&', sl: '<<', sr: '>>', nxr: '&<', nxl: '&>', adj: '-|-' };
const FTS: Record<string, string> = { fts: 'to_tsquery', plfts: 'plainto_tsquery', phfts: 'phraseto_tsquery', wfts: 'websearch_to_tsquery' };

/** A Postgres array literal of text items: {"a","b \"c\""}. */
function arrayLiteral(items: string[]): string {
  return '{' + items.map((s) => '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"').join(',') + '}';
}

const arrayOf = (t: string) => (t.endsWith('[]') ? t : `${t}[]`);

function filterSql(f: Filter, e: string, expr: FieldExpr, p: Params): string {
  const T = expr.typeSql;
  let sql: string;
  const v = f.value;
  if (f.op in COMPARE) {
    sql = v.kind === 'list'
      ? `${e} ${COMPARE[f.op]} ${f.quantifier === 'all' ? 'ALL' : 'ANY'}(${p.typed(arrayLiteral(v.items), arrayOf(T))})`
      : `${e} ${COMPARE[f.op]} ${typedValue(p, v.kind === 'scalar' ? v.text : '', expr)}`;
  } else if (f.op in PATTERN) {
    const like = f.op === 'like' || f.op === 'ilike';
    const pat = (s: string) => (like ? s.replace(/\*/g, '%') : s);
    sql = v.kind === 'list'
      ? `(${e})::text ${PATTERN[f.op]} ${f.quantifier === 'all' ? 'ALL' : 'ANY'}(${p.typed(arrayLiteral(v.items.map(pat)), 'pg_catalog.text[]')})`
      : `(${e})::text ${PATTERN[f.op]} ${p.text(pat(v.kind === 'scalar' ? v.text : ''))}`;
  } else if (f.op === 'in') {
    const items = v.kind === 'list' ? v.items : [];
    sql = expr.isArray
      ? (items.length === 0 ? 'false' : `${e} IN (${items.map((i) => p.typed(i, T)).join(', ')})`)
      : plainColumn(expr)?.representation?.fromText
        ? (items.length === 0 ? 'false' : `${e} IN (${items.map((i) => typedValue(p, i, expr)).join(', ')})`)
        : `${e} = ANY(${p.typed(arrayLiteral(items), arrayOf(T))})`;
  } else if (f.op === 'is') {
    const which = v.kind === 'is' ? v.value : 'null';
    sql = `${e} IS ${{ null: 'NULL', not_null: 'NOT NULL', true: 'TRUE', false: 'FALSE', unknown: 'UNKNOWN' }[which]}`;
  } else if (f.op === 'isdistinct') {
    sql = `${e} IS DISTINCT FROM ${p.typed(v.kind === 'scalar' ? v.text : '', T)}`;
  } else if (f.op in FTS) {
    const lang = v.kind === 'fts' && v.language ? `${p.text(v.language)}::regconfig` : undefined;
    const text = v.kind === 'fts' ? v.text : '';
    const vector = expr.baseType === 'tsvector' ? e : `pg_catalog.to_tsvector(${lang ? lang + ', ' : ''}(${e})::text)`;
    sql = `${vector} @@ pg_catalog.${FTS[f.op]}(${lang ? lang + ', ' : ''}${p.text(text)})`;
  } else {
    sql = `${e} ${RANGE_OPS[f.op]} ${p.typed(v.kind === 'scalar' ? v.text : '', T)}`;
  }
  return f.negate ? `NOT (${sql})` : sql;
}

export function conditionSql(c: PlanCondition, row: RowRef, p: Params): string {
  switch (c.kind) {
    case 'filter':
      return filterSql(c.filter, fieldSql(c.expr, row, p), c.expr, p);
    case 'embedNull':
      return `${ident(c.embed.lateral)}.${ident(c.embed.key)} IS ${c.isNull ? '' : 'NOT '}NULL`;
    case 'logic': {
      const parts = c.children.map((x) => conditionSql(x, row, p));
      const joined = `(${parts.join(c.op === 'and' ? ' AND ' : ' OR ')})`;
      return c.negate ? `NOT ${joined}` : joined;
    }
  }
}
