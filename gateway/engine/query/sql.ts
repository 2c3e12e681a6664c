// Expression builders shared by reads and writes: fields, filters and conditions as SQL
// fragments (../engine/sql.ts). Identifiers come from the schema cache through ident(), types
// and representation functions as its catalog text, and client values only ever as parameters
// (sent as text, cast in SQL to the type the schema cache names).

import { catalog, catalogArrayOf, join, qualified, ident, sql, text, type CatalogText, type Fragment } from '../sql.js';
import type { FieldExpr, PlanCondition } from '../plan/types.js';
import type { Filter, JsonStep } from '../request/types.js';
import type { Relation } from '../schema-cache/types.js';
import { defined } from '../invariant.js';

/** How a node's row is reached: a table alias in reads, a returned row in writes. */
export interface RowRef {
  col(name: string): Fragment;
  row(): Fragment;
  star(): Fragment;
}

/**
 * A relation's row as a value of its type, made of its columns: `ROW(a, b, …)::schema.table`.
 * Not the alias itself (a whole-row reference): a sharded database (Citus) runs the statement on
 * a shard, a table of its own whose row type is not the relation's, and a function of the
 * relation's row (a computed field) would then be called with a row of another type.
 */
export const rowOf = (relation: Relation, col: (name: string) => Fragment): Fragment =>
  sql`ROW(${join(relation.columnList.map((c) => col(c.name)))})::${qualified(relation.schema, relation.name)}`;

export const aliasRow = (alias: string, relation: Relation): RowRef => {
  const col = (name: string) => sql`${ident(alias)}.${ident(name)}`;
  return { col, row: () => rowOf(relation, col), star: () => sql`${ident(alias)}.*` };
};

/** A text parameter cast to a type the schema cache named: `$n::text::type`. */
export const typed = (value: string | null, type: CatalogText): Fragment => sql`${text(value)}::${catalog(type)}`;

/** A call of a function the schema cache named (a qualified name, as catalog text). */
export const callOf = (fn: CatalogText, arg: Fragment): Fragment => sql`${catalog(fn)}(${arg})`;

const ARROWS: Record<JsonStep['arrow'], Fragment> = { '->': sql`->`, '->>': sql`->>` };

export function fieldSql(expr: FieldExpr, row: RowRef): Fragment {
  let out =
    expr.source.kind === 'column'
      ? row.col(expr.source.column.name)
      : sql`${qualified(expr.source.fn.schema, expr.source.fn.name)}(${row.row()})`;
  // Arrows also reach into arrays and composite values, through their JSON form (as PostgREST).
  const base = expr.source.kind === 'column' ? expr.source.column.baseType : expr.source.fn.baseType;
  const isArray = expr.source.kind === 'column' ? expr.source.column.isArray : expr.source.fn.isArray;
  if (expr.json.length > 0 && (isArray || (base !== 'json' && base !== 'jsonb')))
    out = sql`pg_catalog.to_jsonb(${out})`;
  for (const step of expr.json) {
    const key = /^-?\d+$/.test(step.key) ? sql`${text(step.key)}::int4` : text(step.key);
    out = sql`(${out}${ARROWS[step.arrow]}${key})`;
  }
  if (expr.cast) out = sql`CAST(${out} AS ${catalog(expr.cast)})`;
  return out;
}

/** A field as shown in output: through its domain's cast to json when it has one. */
export function outputSql(expr: FieldExpr, row: RowRef): Fragment {
  const out = fieldSql(expr, row);
  const toJson = plainColumn(expr)?.representation?.toJson;
  return toJson ? callOf(toJson, out) : out;
}

const plainColumn = (expr: FieldExpr) =>
  expr.source.kind === 'column' && expr.json.length === 0 && expr.cast === undefined ? expr.source.column : undefined;

/** A filter value of the field's type: through its domain's cast from text when it has one. */
function typedValue(value: string, expr: FieldExpr): Fragment {
  const fromText = plainColumn(expr)?.representation?.fromText;
  return fromText ? callOf(fromText, text(value)) : typed(value, expr.typeSql);
}

const COMPARE: Record<string, Fragment> = {
  eq: sql`=`,
  neq: sql`<>`,
  gt: sql`>`,
  gte: sql`>=`,
  lt: sql`<`,
  lte: sql`<=`,
};
const PATTERN: Record<string, Fragment> = { like: sql`LIKE`, ilike: sql`ILIKE`, match: sql`~`, imatch: sql`~*` };
const RANGE_OPS: Record<string, Fragment> = {
  cs: sql`@>`,
  cd: sql`<@`,
  ov: sql`&&`,
  sl: sql`<<`,
  sr: sql`>>`,
  nxr: sql`&<`,
  nxl: sql`&>`,
  adj: sql`-|-`,
};
const FTS: Record<string, Fragment> = {
  fts: sql`to_tsquery`,
  plfts: sql`plainto_tsquery`,
  phfts: sql`phraseto_tsquery`,
  wfts: sql`websearch_to_tsquery`,
};
const IS = { null: sql`NULL`, not_null: sql`NOT NULL`, true: sql`TRUE`, false: sql`FALSE`, unknown: sql`UNKNOWN` };
const TEXT_ARRAY = sql`pg_catalog.text[]`;

/** A Postgres array literal of text items: {"a","b \"c\""}. */
function arrayLiteral(items: string[]): string {
  return '{' + items.map((s) => '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"').join(',') + '}';
}

const quantified = (all: boolean | undefined, array: Fragment) => (all ? sql`ALL(${array})` : sql`ANY(${array})`);

function filterSql(f: Filter, e: Fragment, expr: FieldExpr): Fragment {
  const T = expr.typeSql;
  let out: Fragment;
  const v = f.value;
  const all = f.quantifier === 'all';
  const compare = COMPARE[f.op];
  const pattern = PATTERN[f.op];
  const fts = FTS[f.op];
  if (compare) {
    out =
      v.kind === 'list'
        ? sql`${e} ${compare} ${quantified(all, typed(arrayLiteral(v.items), catalogArrayOf(T)))}`
        : sql`${e} ${compare} ${typedValue(v.kind === 'scalar' ? v.text : '', expr)}`;
  } else if (pattern) {
    const like = f.op === 'like' || f.op === 'ilike';
    const pat = (s: string) => (like ? s.replace(/\*/g, '%') : s);
    out =
      v.kind === 'list'
        ? sql`(${e})::text ${pattern} ${quantified(all, sql`${text(arrayLiteral(v.items.map(pat)))}::${TEXT_ARRAY}`)}`
        : sql`(${e})::text ${pattern} ${text(pat(v.kind === 'scalar' ? v.text : ''))}`;
  } else if (f.op === 'in') {
    const items = v.kind === 'list' ? v.items : [];
    out = expr.isArray
      ? items.length === 0
        ? sql`false`
        : sql`${e} IN (${join(items.map((i) => typed(i, T)))})`
      : plainColumn(expr)?.representation?.fromText
        ? items.length === 0
          ? sql`false`
          : sql`${e} IN (${join(items.map((i) => typedValue(i, expr)))})`
        : sql`${e} = ANY(${typed(arrayLiteral(items), catalogArrayOf(T))})`;
  } else if (f.op === 'is') {
    out = sql`${e} IS ${IS[v.kind === 'is' ? v.value : 'null']}`;
  } else if (f.op === 'isdistinct') {
    out = sql`${e} IS DISTINCT FROM ${typed(v.kind === 'scalar' ? v.text : '', T)}`;
  } else if (fts) {
    const lang = v.kind === 'fts' && v.language ? sql`${text(v.language)}::regconfig, ` : sql``;
    const query = v.kind === 'fts' ? v.text : '';
    const vector = expr.baseType === 'tsvector' ? e : sql`pg_catalog.to_tsvector(${lang}(${e})::text)`;
    out = sql`${vector} @@ pg_catalog.${fts}(${lang}${text(query)})`;
  } else {
    const range = defined(RANGE_OPS[f.op], `the SQL of the operator ${f.op}`);
    out = sql`${e} ${range} ${typed(v.kind === 'scalar' ? v.text : '', T)}`;
  }
  return f.negate ? sql`NOT (${out})` : out;
}

export function conditionSql(c: PlanCondition, row: RowRef): Fragment {
  switch (c.kind) {
    case 'filter':
      return filterSql(c.filter, fieldSql(c.expr, row), c.expr);
    case 'embedNull':
      return sql`${ident(c.embed.lateral)}.${ident(c.embed.key)} IS ${c.isNull ? sql`NULL` : sql`NOT NULL`}`;
    case 'logic': {
      const joined = sql`(${join(
        c.children.map((x) => conditionSql(x, row)),
        c.op === 'and' ? sql` AND ` : sql` OR `,
      )})`;
      return c.negate ? sql`NOT ${joined}` : joined;
    }
  }
}
