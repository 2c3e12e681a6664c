// Expression builders shared by reads and writes: fields, filters and conditions as SQL
// fragments (../sql.ts, the one place SQL text is put together). Identifiers come from the
// schema cache through ident(), types and representation functions as its catalog text, and
// client values only ever as parameters (sent as text, cast in SQL to the type the schema cache
// names).

import { catalog, catalogArrayOf, join, qualified, ident, sql, text, type CatalogText, type Fragment } from '../sql.js';
import type { FieldExpr, PlanCondition } from '../plan/types.js';
import type { Filter, FilterValue, JsonStep } from '../request/types.js';
import { OPERATORS, type OperatorRule, type OperatorShape } from '../operators.js';
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
    const key = step.index ? sql`${text(step.key)}::int4` : text(step.key);
    out = sql`(${out}${ARROWS[step.arrow]}${key})`;
  }
  if (expr.cast) out = sql`CAST(${out} AS ${catalog(expr.cast)})`;
  return out;
}

/**
 * A field as shown in output: through its domain's cast to json when it has one, and a cast the
 * client asked for applies to that shown value (`color::text` is '"#01E240"'), as in PostgREST.
 */
export function outputSql(expr: FieldExpr, row: RowRef): Fragment {
  const toJson =
    expr.source.kind === 'column' && expr.json.length === 0 ? expr.source.column.representation?.toJson : undefined;
  if (!toJson) return fieldSql(expr, row);
  const shown = callOf(toJson, fieldSql({ ...expr, cast: undefined }, row));
  return expr.cast ? sql`CAST(${shown} AS ${catalog(expr.cast)})` : shown;
}

const plainColumn = (expr: FieldExpr) =>
  expr.source.kind === 'column' && expr.json.length === 0 && expr.cast === undefined ? expr.source.column : undefined;

/** A filter value of the field's type: through its domain's cast from text when it has one. */
function typedValue(value: string, expr: FieldExpr): Fragment {
  const fromText = plainColumn(expr)?.representation?.fromText;
  return fromText ? callOf(fromText, text(value)) : typed(value, expr.typeSql);
}

const TEXT_ARRAY = sql`pg_catalog.text[]`;

/** A Postgres array literal of text items: {"a","b \\"c\\""}. */
function arrayLiteral(items: string[]): string {
  return '{' + items.map((s) => '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"').join(',') + '}';
}

const quantified = (all: boolean | undefined, array: Fragment) => (all ? sql`ALL(${array})` : sql`ANY(${array})`);

const scalar = (v: FilterValue): string => (v.kind === 'scalar' ? v.text : '');

/** The SQL of each shape of operator (../operators.ts): a new shape is a type error until it has one. */
const SHAPES: {
  [S in OperatorShape]: (
    rule: Extract<OperatorRule, { shape: S }>,
    f: Filter,
    e: Fragment,
    expr: FieldExpr,
  ) => Fragment;
} = {
  compare: (rule, f, e, expr) =>
    f.value.kind === 'list'
      ? sql`${e} ${rule.sql} ${quantified(f.quantifier === 'all', typed(arrayLiteral(f.value.items), catalogArrayOf(expr.typeSql)))}`
      : sql`${e} ${rule.sql} ${typedValue(scalar(f.value), expr)}`,
  pattern: (rule, f, e) => {
    const pat = (s: string) => (rule.wildcard ? s.replace(/\*/g, '%') : s);
    return f.value.kind === 'list'
      ? sql`(${e})::text ${rule.sql} ${quantified(f.quantifier === 'all', sql`${text(arrayLiteral(f.value.items.map(pat)))}::${TEXT_ARRAY}`)}`
      : sql`(${e})::text ${rule.sql} ${text(pat(scalar(f.value)))}`;
  },
  binary: (rule, f, e, expr) => sql`${e} ${rule.sql} ${typed(scalar(f.value), expr.typeSql)}`,
  list: (_rule, f, e, expr) => {
    const items = f.value.kind === 'list' ? f.value.items : [];
    const T = expr.typeSql;
    return expr.isArray
      ? items.length === 0
        ? sql`false`
        : sql`${e} IN (${join(items.map((i) => typed(i, T)))})`
      : plainColumn(expr)?.representation?.fromText
        ? items.length === 0
          ? sql`false`
          : sql`${e} IN (${join(items.map((i) => typedValue(i, expr)))})`
        : sql`${e} = ANY(${typed(arrayLiteral(items), catalogArrayOf(T))})`;
  },
  keyword: (rule, f, e) =>
    sql`${e} IS ${defined(f.value.kind === 'is' ? rule.values[f.value.value] : undefined, 'a keyword the grammar accepted')}`,
  search: (rule, f, e, expr) => {
    const v = f.value;
    const lang = v.kind === 'fts' && v.language ? sql`${text(v.language)}::regconfig, ` : sql``;
    const query = v.kind === 'fts' ? v.text : '';
    const vector = expr.baseType === 'tsvector' ? e : sql`pg_catalog.to_tsvector(${lang}(${e})::text)`;
    return sql`${vector} @@ pg_catalog.${rule.sql}(${lang}${text(query)})`;
  },
};

function filterSql(f: Filter, e: Fragment, expr: FieldExpr): Fragment {
  const rule: OperatorRule = OPERATORS[f.op];
  const build = SHAPES[rule.shape] as (r: OperatorRule, f: Filter, e: Fragment, expr: FieldExpr) => Fragment;
  const out = build(rule, f, e, expr);
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
