// PostgREST's filter operators, each once: how its value is written and the SQL it becomes. The
// Operator type, the request grammar (request/grammar.ts), the SQL compiler (query/expressions.ts) and
// the operator lists of hints and OpenAPI descriptions all read this table, so a new operator is
// one entry here: an entry without its SQL does not type-check, and a new shape of operator
// without its SQL builder in query/expressions.ts does not either.

import { sql, type Fragment } from './sql.js';

/** How an operator's value is written and turned into SQL; `sql` is the operator or function. */
export type OperatorRule =
  /** `e <sql> value`, the value of the field's type; if `quantified`, `op(any)`/`op(all)` take a `{…}` list. */
  | { shape: 'compare'; sql: Fragment; quantified: boolean }
  /** `(e)::text <sql> pattern`; with `wildcard`, `*` stands for `%`; `(any)`/`(all)` as compare. */
  | { shape: 'pattern'; sql: Fragment; wildcard: boolean; quantified: boolean }
  /** `e <sql> value`, the value cast to the field's own type (arrays, ranges, IS DISTINCT FROM). */
  | { shape: 'binary'; sql: Fragment }
  /** `e IN (…)`, written `in.(a,b,"c,d")`. */
  | { shape: 'list' }
  /** `e IS <keyword>`, written `is.null`: the keywords the value may be, and their SQL. */
  | { shape: 'keyword'; values: Readonly<Record<string, Fragment>> }
  /** `to_tsvector(e) @@ <sql>([language,] words)`, written `op.words` or `op(language).words`. */
  | { shape: 'search'; sql: Fragment };

export const OPERATORS = {
  eq: { shape: 'compare', sql: sql`=`, quantified: true },
  neq: { shape: 'compare', sql: sql`<>`, quantified: false },
  gt: { shape: 'compare', sql: sql`>`, quantified: true },
  gte: { shape: 'compare', sql: sql`>=`, quantified: true },
  lt: { shape: 'compare', sql: sql`<`, quantified: true },
  lte: { shape: 'compare', sql: sql`<=`, quantified: true },
  like: { shape: 'pattern', sql: sql`LIKE`, wildcard: true, quantified: true },
  ilike: { shape: 'pattern', sql: sql`ILIKE`, wildcard: true, quantified: true },
  match: { shape: 'pattern', sql: sql`~`, wildcard: false, quantified: true },
  imatch: { shape: 'pattern', sql: sql`~*`, wildcard: false, quantified: true },
  in: { shape: 'list' },
  is: {
    shape: 'keyword',
    values: { null: sql`NULL`, not_null: sql`NOT NULL`, true: sql`TRUE`, false: sql`FALSE`, unknown: sql`UNKNOWN` },
  },
  isdistinct: { shape: 'binary', sql: sql`IS DISTINCT FROM` },
  fts: { shape: 'search', sql: sql`to_tsquery` },
  plfts: { shape: 'search', sql: sql`plainto_tsquery` },
  phfts: { shape: 'search', sql: sql`phraseto_tsquery` },
  wfts: { shape: 'search', sql: sql`websearch_to_tsquery` },
  cs: { shape: 'binary', sql: sql`@>` },
  cd: { shape: 'binary', sql: sql`<@` },
  ov: { shape: 'binary', sql: sql`&&` },
  sl: { shape: 'binary', sql: sql`<<` },
  sr: { shape: 'binary', sql: sql`>>` },
  nxr: { shape: 'binary', sql: sql`&<` },
  nxl: { shape: 'binary', sql: sql`&>` },
  adj: { shape: 'binary', sql: sql`-|-` },
} as const satisfies Record<string, OperatorRule>;

export type Operator = keyof typeof OPERATORS;
export type OperatorShape = OperatorRule['shape'];

/** Every operator, in the table's order (hints and documentation list them so). */
export const OPERATOR_NAMES = Object.keys(OPERATORS) as Operator[];

/**
 * Whether a query value reads as a filter (`gt.2`, `not.in.(1,3)`, `fts(english).cat`,
 * `eq(any).{1,2}`): PostgREST tells a function's arguments from filters on its rows so, by the
 * value, not by the key.
 */
export function isFilterValue(value: string): boolean {
  const head = value.split('.')[0] ?? '';
  if (head === 'not') return value.startsWith('not.');
  return Object.hasOwn(OPERATORS, head.split('(')[0] ?? '');
}

/** The operators of some shapes, in the table's order. */
export const operatorsOf = (...shapes: OperatorShape[]): Operator[] =>
  OPERATOR_NAMES.filter((op) => shapes.includes(OPERATORS[op].shape));

/** The operators that take `(any)`/`(all)` before their value: `eq(any).{1,2}`. */
export const isQuantified = (op: Operator): boolean => {
  const rule: OperatorRule = OPERATORS[op];
  return (rule.shape === 'compare' || rule.shape === 'pattern') && rule.quantified;
};

/** The keywords of `is`. */
export type IsKeyword = keyof (typeof OPERATORS)['is']['values'];
