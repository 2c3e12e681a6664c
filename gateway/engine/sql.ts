// SQL as typed fragments: the only place SQL text is put together. A fragment carries its text
// and its parameters together, so a value can never be spliced into the text and a text can
// never lose its values. Four ways make a fragment:
//
//   sql`…${fragment}…`   a template whose holes take fragments only: interpolating a plain
//                        string is a compile error (and a run-time one, for JavaScript callers)
//   param(value)         a value, sent as a $n parameter
//   ident(name)          an identifier, quoted; refuses NUL, which Postgres cannot store
//   catalog(text)        text the schema cache read from pg_catalog (a type, a default); only
//                        the schema cache loader makes CatalogText, so no client string can
//   literal(value)       a value quoted as a string literal, for the one statement that takes
//                        no parameter and must carry a value: SET LOCAL (see literal())
//   count(n)             a row count (LIMIT) as a number, so that a read's plan is reused
//                        (see count())
//
// compile() numbers the parameters once, at the end; run() (the one place a statement is sent
// to Postgres through postgres.js's unsafe()) accepts only what it returns.

import type { Row, Sql } from 'postgres';

declare const catalogBrand: unique symbol;

/** Text that came from pg_catalog (a formatted type, a default expression), never from a client. */
export type CatalogText = string & { readonly [catalogBrand]: true };

/** Marks pg_catalog text as such. Only the schema cache loader calls this (a lint rule holds it). */
export function catalogText(text: string): CatalogText {
  return text as CatalogText;
}

/** An array of a catalog type: `t[]`, unless `t` is one already. */
export function catalogArrayOf(t: CatalogText): CatalogText {
  return (t.endsWith('[]') ? t : `${t}[]`) as CatalogText;
}

/** A parameter value: Postgres receives it as text and the SQL casts it where needed. */
export type SqlValue = string | null;

type Part = { readonly text: string } | { readonly value: SqlValue } | { readonly claim: string };

export class Fragment {
  /** @internal Use sql``, param(), ident(), catalog(), join(). */
  constructor(readonly parts: readonly Part[]) {}

  /** True when the fragment has no text and no parameter. */
  get empty(): boolean {
    return this.parts.every((p) => 'text' in p && p.text === '');
  }
}

/** A compiled statement: text with $1…$n, and the values in that order. */
export interface CompiledSql {
  readonly text: string;
  readonly params: readonly SqlValue[];
  /** Parameters whose values are the request's JWT claims (claim()), filled by withClaims(). */
  readonly claims?: readonly { readonly index: number; readonly name: string }[];
}

const EMPTY = new Fragment([]);

function isTemplate(strings: unknown): strings is TemplateStringsArray {
  return Array.isArray(strings) && Object.isFrozen(strings) && Array.isArray((strings as { raw?: unknown }).raw);
}

/** A fragment from a template literal; every hole must be a Fragment. */
export function sql(strings: TemplateStringsArray, ...holes: Fragment[]): Fragment {
  // A call with a built array instead of a literal would let arbitrary text in: refuse it.
  if (!isTemplate(strings)) throw new TypeError('sql`` is a template tag: call it with a template literal');
  const parts: Part[] = [];
  strings.forEach((text, i) => {
    if (text !== '') parts.push({ text });
    if (i < holes.length) {
      const hole = holes[i];
      if (!(hole instanceof Fragment))
        throw new TypeError('sql`` holes take fragments only: use param(), ident() or sql``');
      parts.push(...hole.parts);
    }
  });
  return new Fragment(parts);
}

/** A value as a parameter ($n); cast it in SQL where its type matters. */
export function param(value: SqlValue): Fragment {
  return new Fragment([{ value }]);
}

/**
 * A parameter whose value is the JWT claim `name` of the request that runs the statement (text;
 * NULL when the claim is absent or not a scalar). Its value is not known when the statement is
 * compiled, so a compiled statement can be kept and run for another caller: withClaims() fills
 * it, just before the statement is sent.
 */
export function claim(name: string): Fragment {
  // One part per name: compile() numbers a part once, so a claim used twice is one parameter.
  let fragment = claims.get(name);
  if (!fragment) claims.set(name, (fragment = new Fragment([{ claim: name }])));
  return fragment;
}
const claims = new Map<string, Fragment>();

/** A value as a text parameter, cast to text so its type is never left to inference. */
export function text(value: SqlValue): Fragment {
  return sql`${param(value)}::text`;
}

/** Thrown for an identifier Postgres could not hold; the request layer refuses these earlier. */
export class InvalidIdentifier extends Error {}

/** An identifier, double-quoted. Names come from the schema cache; NUL is refused. */
export function ident(name: string): Fragment {
  if (name.includes('\0')) throw new InvalidIdentifier('an identifier cannot contain the NUL character');
  return new Fragment([{ text: '"' + name.replace(/"/g, '""') + '"' }]);
}

/** Thrown for a value a string literal could not hold (NUL, which Postgres cannot store either). */
export class InvalidLiteral extends Error {}

/**
 * A value as a string literal, for where Postgres takes no parameter: SET LOCAL, whose value a
 * distributed database (Citus) copies to the other servers of the transaction, which
 * set_config() with a parameter does not. The only place a value becomes SQL text. An escape
 * string (E'…') with every backslash and quote doubled reads back as the very value whatever
 * standard_conforming_strings says; NUL is refused. Everything else is a parameter.
 */
export function literal(value: string): Fragment {
  if (value.includes('\0')) throw new InvalidLiteral('a string literal cannot contain the NUL character');
  return new Fragment([{ text: "E'" + value.replace(/\\/g, '\\\\').replace(/'/g, "''") + "'" }]);
}

/** Thrown for a row count that is not a non-negative safe integer; the parser refuses these earlier. */
class InvalidCount extends Error {}

/**
 * A row count (a LIMIT) as a number in the text, not a parameter: Postgres plans a statement
 * whose LIMIT is a parameter for a tenth of its rows (it cannot know the value), so a plan made
 * once for every value looked dearer than planning each call anew, and every read was planned
 * at every call (0.1-0.3 ms of Postgres's CPU per list read); with the number in the text, the
 * prepared statement's plan is made once and reused. Only a non-negative safe integer, written
 * by String(): a count can carry no other text.
 */
export function count(n: number): Fragment {
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidCount(`a row count must be a non-negative integer: ${n}`);
  return new Fragment([{ text: String(n) }]);
}

/** schema.name, each part quoted. */
export function qualified(schema: string, name: string): Fragment {
  return sql`${ident(schema)}.${ident(name)}`;
}

/** Catalog text (a type such as `numeric(12,4)`, a default expression) as SQL. */
export function catalog(text: CatalogText): Fragment {
  return new Fragment([{ text }]);
}

/** Fragments joined by a separator (itself a fragment, `, ` by default); empty for none. */
export function join(items: readonly Fragment[], separator: Fragment = sql`, `): Fragment {
  const parts: Part[] = [];
  items.forEach((item, i) => {
    if (i > 0) parts.push(...separator.parts);
    parts.push(...item.parts);
  });
  return new Fragment(parts);
}

/** The empty fragment, for optional clauses. */
export function empty(): Fragment {
  return EMPTY;
}

/**
 * Numbers the parameters $1…$n, in order of first appearance. A parameter made once and used
 * twice (a filter in the page and in its count, a regconfig in to_tsvector and in to_tsquery)
 * is one parameter: it is the same part, so it keeps its number.
 */
export function compile(fragment: Fragment): CompiledSql {
  let out = '';
  const params: SqlValue[] = [];
  const claims: { index: number; name: string }[] = [];
  const numbers = new Map<Part, number>();
  for (const part of fragment.parts) {
    if ('text' in part) out += part.text;
    else {
      let n = numbers.get(part);
      if (n === undefined) {
        n = params.push('value' in part ? part.value : null);
        if ('claim' in part) claims.push({ index: n - 1, name: part.claim });
        numbers.set(part, n);
      }
      out += '$' + n;
    }
  }
  return claims.length > 0 ? { text: out, params, claims } : { text: out, params };
}

/** The statement with its claim() parameters given the values of `claims` (itself when it has none). */
export function withClaims(statement: CompiledSql, claims: Readonly<Record<string, unknown>>): CompiledSql {
  if (!statement.claims) return statement;
  const params = statement.params.slice();
  for (const { index, name } of statement.claims) {
    const v = claims[name];
    params[index] = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : null;
  }
  return { text: statement.text, params };
}

/**
 * A statement whose text never depends on its values, compiled once: `build` gets stand-in
 * parameters, and each call only puts its values where the stand-ins went (in the order
 * compile() numbered them). For the statements every request sends.
 */
export function compiledOnce(
  arity: number,
  build: (...values: Fragment[]) => Fragment,
): (...values: SqlValue[]) => CompiledSql {
  const standIns = Array.from({ length: arity }, (_, i) => `\0stand-in ${i}`);
  const { text, params } = compile(build(...standIns.map(param)));
  const order = params.map((p) => standIns.indexOf(p as string));
  if (order.includes(-1) || new Set(order).size !== arity) throw new TypeError('compiledOnce: use every value once');
  return (...values) => ({ text, params: order.map((i) => values[i] ?? null) });
}

/**
 * A compiled statement with a head that has no parameters (`EXPLAIN (…) `) before it: the
 * statement's numbering stays valid.
 */
export function prefixed(head: Fragment, statement: CompiledSql): CompiledSql {
  const h = compile(head);
  if (h.params.length > 0) throw new TypeError('prefixed() takes a head without parameters');
  return { ...statement, text: h.text + statement.text };
}

/**
 * Sends a compiled statement on a postgres.js connection (or pool), every parameter as text
 * (oid 25; the SQL casts it), as a prepared statement unless `prepare` is false. postgres.js
 * sends a statement without parameters as a simple query, which Postgres parses and plans at
 * every call, unless told otherwise: a prepared one is parsed once per connection (BEGIN, the
 * pre-request function, COMMIT: every request runs them).
 */
export function run<T extends object[] = Row[]>(conn: Sql, statement: CompiledSql, prepare = true) {
  const params = statement.params.map((v) => (v === null ? null : conn.typed(v, 25)));
  return conn.unsafe<T>(statement.text, params as never[], prepare ? PREPARED : UNPREPARED);
}

// `simple` is an option of postgres.js's unsafe() its types leave out.
const PREPARED = { prepare: true, simple: false };
const UNPREPARED = { prepare: false };
