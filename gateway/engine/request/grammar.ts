// PostgREST's query grammar: select trees, filters, logic trees, order terms, column lists and
// the paths of filter keys, on the Parsec rules of ./parsec.ts, so that what PostgREST refuses
// is refused at the same place with the same words ("failed to parse order (id.ac)" (line 1,
// column 4), unexpected "c" expecting "asc", …). Where PostgREST stops reading and ignores the
// rest of a parameter, Tally reads it to its end: trailing text is refused, not dropped.
// Pure functions from strings to the types of ./types.ts.

import { catalogue } from '../errors/catalogue.js';
import { isQuantified, operatorsOf, OPERATORS, type IsKeyword, type Operator } from '../operators.js';
import {
  ahead,
  alt,
  attempt,
  caseless,
  char,
  eof,
  label,
  lazy,
  lexeme,
  literal,
  many,
  map,
  memo,
  notFollowedBy,
  one,
  option,
  optional,
  parseWith,
  pure,
  rest,
  run,
  sepBy,
  sepBy1,
  seq,
  startingWith,
  where,
  type CharClass,
  type Parser,
} from './parsec.js';
import type { AggregateFn, Condition, FieldRef, Filter, JsonStep, OrderTerm, SelectItem } from './types.js';

// ---- characters --------------------------------------------------------------------------

const LETTER = /\p{L}/u;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isLetter = (c: number) =>
  (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c > 0x7f && LETTER.test(String.fromCodePoint(c)));
const noneOf = (chars: string): CharClass => {
  const codes = new Set([...chars].map((c) => c.charCodeAt(0)));
  return { test: (c) => !codes.has(c), expects: [] };
};

/** A name's characters: letters, digits, `_`, `$` and spaces (trimmed off its ends). */
const IDENTIFIER: CharClass = {
  test: (c) => isLetter(c) || isDigit(c) || c === 0x5f || c === 0x20 || c === 0x24,
  expects: ['letter', 'digit'],
};
const DIGIT: CharClass = { test: isDigit, expects: ['digit'] };
const JSON_KEY = noneOf('(-:.,>)');
const ELEMENT = noneOf(',)');
const IN_BRACES = noneOf('{}');
const CLOSE: CharClass = { test: (c) => c === 0x29, expects: [] };
const GREATER: CharClass = { test: (c) => c === 0x3e, expects: ['">"'] };
const COLON: CharClass = { test: (c) => c === 0x3a, expects: ['":"'] };

// ---- names and values ----------------------------------------------------------------------

const delimiter = label(char('.'), 'delimiter (.)');

const anyChar = one({ test: () => true, expects: [] });

/** A double-quoted value, with backslash escapes. */
const quoted: Parser<string> = seq(
  [
    char('"'),
    many(
      alt(
        run(noneOf('\\"'), 1),
        seq([char('\\'), anyChar], (_, c) => c),
      ),
    ),
    char('"'),
  ],
  (_, parts) => parts.join(''),
);

/**
 * Postgres cannot hold NUL in a name (PostgREST cuts names there): a name with one is refused
 * here, before any SQL exists, rather than sent and answered by a broken connection.
 */
function refuseNul(name: string): string {
  if (name.includes('\0')) {
    throw catalogue.parse('name', 'a name contains the NUL character (%00)', 'Names cannot contain NUL; remove it');
  }
  return name;
}

/** Parts joined by "-", where a "-" does not start "->". */
const dash = attempt(seq([char('-'), notFollowedBy(GREATER)], (d) => d));
const dashed = (p: Parser<string>) => map(sepBy1(p, dash), (parts) => parts.join('-'));

const identifier = map(run(IDENTIFIER, 1), (s) => s.trim());

const fieldName = memo(map(label(alt(quoted, dashed(identifier)), 'field name (* or [a..z0..9_$])'), refuseNul));

/** Where a bare array index ends, so that `->1x` is a key. */
const indexEnd = alt(ahead('->'), ahead('::'), ahead('.'), ahead(','), attempt(eof));
const jsonIndex = seq([option('', char('-')), run(DIGIT, 1), indexEnd], (sign, digits) => sign + digits);
const jsonKey = map(
  label(
    alt(quoted, dashed(map(run(JSON_KEY, 1), (s) => s.trim()))),
    'any non reserved character different from: .,>()',
  ),
  refuseNul,
);
const jsonStep = startingWith(
  '-',
  seq(
    [
      alt(attempt(literal('->>')), attempt(literal('->'))),
      alt(attempt(map(jsonIndex, (key) => ({ key, index: true as const }))), attempt(map(jsonKey, (key) => ({ key })))),
    ],
    (arrow, operand): JsonStep => ({ arrow: arrow as JsonStep['arrow'], ...operand }),
  ),
);
const jsonPath = many(jsonStep);

const field: Parser<FieldRef> = memo(lexeme(seq([fieldName, option([], jsonPath)], (name, json) => ({ name, json }))));

const cast = optional(
  startingWith(
    ':',
    seq([literal('::'), identifier], (_, type) => type),
  ),
);
const aliasOf = memo(optional(attempt(seq([fieldName, char(':'), notFollowedBy(COLON)], (name) => name))));

// ---- select ----------------------------------------------------------------------------

const selectEnd = alt(ahead(')'), ahead(','), attempt(eof));

interface EmbedParams {
  hint?: string;
  inner: boolean;
}
/** `!hint` and `!inner`/`!left`, at most two, the first of each kind counting. */
const embedParam = startingWith(
  '!',
  seq(
    [
      char('!'),
      alt(
        attempt(map(literal('left'), () => ({ join: 'left' as const }))),
        attempt(map(literal('inner'), () => ({ join: 'inner' as const }))),
        attempt(map(fieldName, (hint) => ({ hint }))),
      ),
    ],
    (_, p): { hint?: string; join?: 'left' | 'inner' } => p,
  ),
);
const embedParams = seq([optional(embedParam), optional(embedParam)], (a, b): EmbedParams => {
  const hint = a?.hint ?? b?.hint;
  const join = a?.join ?? b?.join;
  return { hint, inner: join === 'inner' };
});
const beforeOpen = ahead('(');

const spreadHead = lexeme(
  seq([literal('...'), fieldName, embedParams, beforeOpen], (_, name, params) => ({
    name,
    alias: undefined,
    ...params,
  })),
);
const embedHead = lexeme(
  seq([aliasOf, where(fieldName, (name) => name !== 'count'), embedParams, beforeOpen], (alias, name, params) => ({
    name,
    alias,
    ...params,
  })),
);

const aggregate = alt(
  literal('sum'),
  literal('avg'),
  literal('count'),
  attempt(literal('max')),
  attempt(literal('min')),
) as Parser<AggregateFn>;

const fieldItem: Parser<SelectItem> = lexeme(
  alt(
    attempt(seq([literal('*'), selectEnd], (): SelectItem => ({ kind: 'star' }))),
    attempt(
      seq([aliasOf, literal('count()'), cast, selectEnd], (alias, _, type): SelectItem => ({
        kind: 'count',
        alias,
        cast: type,
      })),
    ),
    seq(
      [
        aliasOf,
        field,
        cast,
        optional(startingWith('.', attempt(seq([char('.'), aggregate, literal('()')], (_, fn) => fn)))),
        cast,
        selectEnd,
      ],
      (alias, f, type, fn, fnCast): SelectItem =>
        fn === undefined
          ? { kind: 'field', field: f, alias, cast: type }
          : { kind: 'field', field: f, alias, cast: type, aggregate: fn, aggregateCast: fnCast },
    ),
  ),
);

const children = seq([char('('), lazy(() => selectForest), char(')')], (_, items) => items);

const selectItem: Parser<SelectItem> = alt(
  seq([attempt(spreadHead), children], (h, select): SelectItem => ({ kind: 'embed', spread: true, ...h, select })),
  seq([attempt(embedHead), children], (h, select): SelectItem => ({ kind: 'embed', spread: false, ...h, select })),
  fieldItem,
);
const selectForest: Parser<SelectItem[]> = sepBy(selectItem, lexeme(char(',')));
const selectParameter = seq([selectForest, eof], (items) => items);

export function parseSelect(raw: string): SelectItem[] {
  if (raw.trim() === '') return [{ kind: 'star' }];
  return parseWith(selectParameter, raw, `select parameter (${raw})`);
}

// ---- filters ---------------------------------------------------------------------------

/** The right side of a filter as read: `[not.]op[(modifier)].value`; `value` is still text for scalars. */
export interface Operation {
  negate: boolean;
  op: Operator;
  /** `(any)`/`(all)` of the compare and pattern operators. */
  quantifier?: 'any' | 'all';
  /** The text search configuration of `fts(lang)` and its kin. */
  language?: string;
  value: { kind: 'scalar'; text: string } | { kind: 'list'; items: string[] } | { kind: 'is'; value: IsKeyword };
}

const named = <T extends string>(names: readonly T[], what: string): Parser<T> =>
  label(alt(...names.map((n) => attempt(literal(n)))), what) as Parser<T>;

// The operators are the table's (../operators.ts), read by shape, each group tried longest name
// first: `gte` before `gt`, or `gte.1` would read as `gt` followed by "e". Where no name fits,
// the group's label is what an error says was expected, whatever the order.
const longestFirst = (ops: Operator[]): Operator[] => [...ops].sort((a, b) => b.length - a.length);
/** A value after the operator's delimiter, `(any)`/`(all)` first where the operator takes them. */
const QUANTIFIED = longestFirst(operatorsOf('compare', 'pattern').filter(isQuantified));
/** A value after the operator's delimiter, no more. */
const SIMPLE = longestFirst(operatorsOf('compare', 'pattern', 'binary').filter((op) => !isQuantified(op)));
/** Words to search for, after a text search configuration in parentheses if the client names one. */
const SEARCH = longestFirst(operatorsOf('search'));
const IS_VALUES = Object.keys(OPERATORS.is.values);

/** `in`'s list: `(a,"b,c")`; an element is quoted only where its closing quote ends it. */
const listElement = alt(attempt(seq([quoted, notFollowedBy(ELEMENT)], (q) => q)), run(ELEMENT, 0));
const list = seq([lexeme(char('(')), sepBy1(listElement, char(',')), lexeme(char(')'))], (_, items) =>
  // `in.()` (blanks included) is an empty list: it matches nothing.
  items.length === 1 && items[0] === '' ? [] : items,
);

const operator = (value: Parser<string>): Parser<Omit<Operation, 'negate'>> => {
  const scalar = map(value, (text) => ({ kind: 'scalar' as const, text }));
  const after = (name: string) => attempt(seq([literal(name), delimiter], () => undefined));
  return label(
    alt(
      seq([after('in'), list], (_, items) => ({ op: 'in' as const, value: { kind: 'list' as const, items } })),
      seq(
        [
          after('is'),
          label(alt(...IS_VALUES.map((v) => attempt(caseless(v)))), 'isVal: (null, not_null, true, false, unknown)'),
        ],
        (_, v) => ({
          op: 'is' as const,
          value: { kind: 'is' as const, value: v.toLowerCase() as IsKeyword },
        }),
      ),
      attempt(
        seq(
          [
            alt(...SEARCH.map((n) => attempt(literal(n)))),
            optional(attempt(seq([char('('), identifier, char(')')], (_, lang) => lang))),
            delimiter,
            scalar,
          ],
          (op, language, _, v) => ({ op: op as Operator, language, value: v }),
        ),
      ),
      attempt(
        seq([named(SIMPLE, 'unknown single value operator'), delimiter, scalar], (op, _, v) => ({ op, value: v })),
      ),
      attempt(
        seq(
          [
            named(QUANTIFIED, 'unknown single value operator'),
            optional(
              attempt(
                seq([char('('), alt(attempt(literal('any')), literal('all')), char(')')], (_, q) => q as 'any' | 'all'),
              ),
            ),
            delimiter,
            scalar,
          ],
          (op, quantifier, _, v) => ({ op, quantifier, value: v }),
        ),
      ),
    ),
    'operator (eq, gt, ...)',
  );
};

const operation = (value: Parser<string>): Parser<Operation> =>
  seq(
    [alt(attempt(seq([literal('not'), delimiter], () => true)), pure(false)), operator(value)],
    (negate, o): Operation => ({ negate, ...o }),
  );

const filterValue = seq([operation(rest), eof], (o) => o);

/** `[not.]op[(modifier)].value`, the value of a filter parameter. */
export function parseOperation(raw: string): Operation {
  return parseWith(filterValue, raw, `filter (${raw})`);
}

/** `[embedded.path.]column[->json]`: the key of a filter parameter. */
const treePath = seq([sepBy1(fieldName, delimiter), option([], jsonPath), eof], (names, json) => ({
  path: names.slice(0, -1),
  field: { name: names[names.length - 1]!, json },
}));

export function parseTreePath(key: string): { path: string[]; field: FieldRef } {
  return parseWith(treePath, key, `tree path (${key})`);
}

// ---- logic trees -------------------------------------------------------------------------

/** A value inside a tree ends at "," or ")" unless quoted or an array literal `{…}`. */
const logicValue = alt(
  attempt(seq([quoted, notFollowedBy(ELEMENT)], (q) => q)),
  attempt(seq([literal('{'), run(IN_BRACES, 0), literal('}')], (a, b, c) => a + b + c)),
  run(ELEMENT, 0),
);

const logicTree: Parser<Condition> = alt(
  attempt(
    seq([field, delimiter, operation(logicValue)], (f, _, o): Condition => ({
      kind: 'filter',
      filter: toFilter(f, o),
    })),
  ),
  seq(
    [
      label(alt(attempt(seq([literal('not'), delimiter], () => true)), pure(false)), 'negation operator (not)'),
      label(alt(attempt(literal('and')), literal('or')), 'logic operator (and, or)'),
      lexeme(char('(')),
      sepBy1(
        lazy(() => logicTree),
        lexeme(char(',')),
      ),
      lexeme(char(')')),
    ],
    (negate, op, _, conditions): Condition => ({ kind: 'logic', op: op as 'and' | 'or', negate, children: conditions }),
  ),
);
// Closes past the tree are ignored, as PostgREST ignores them.
const logicParameter = seq([logicTree, run(CLOSE, 0), eof], (tree) => tree);

/**
 * `(a.eq.1,or(b.gt.2,c.is.null))`, the value of an or=/and= parameter, read as PostgREST reads
 * it: joined to the parameter's name (`or(…)`, `not.and(…)`), which the columns count.
 */
export function parseLogic(op: 'and' | 'or', negate: boolean, raw: string): Condition {
  return parseWith(logicParameter, `${negate ? 'not.' : ''}${op}${raw}`, `logic tree (${raw})`);
}

/** `{a,"b,c"}`, the value of `op(any)`/`op(all)`: Postgres's array literal, read into its elements. */
const braceElement = alt(
  attempt(seq([quoted, notFollowedBy(noneOf(',}'))], (q) => q)),
  map(run(noneOf(',}'), 0), (s) => s.trim()),
);
const braceList = seq([lexeme(char('{')), sepBy1(braceElement, char(',')), lexeme(char('}')), eof], (_, items) =>
  items.length === 1 && items[0] === '' ? [] : items,
);

/** A parsed operation on a field: the filter the plan reads. */
export function toFilter(field: FieldRef, o: Operation): Filter {
  const { negate, op, quantifier, value } = o;
  if (value.kind !== 'scalar') return { field, negate, op, quantifier, value };
  if (OPERATORS[op].shape === 'search')
    return { field, negate, op, quantifier, value: { kind: 'fts', language: o.language, text: value.text } };
  if (quantifier === undefined) return { field, negate, op, quantifier, value };
  return { field, negate, op, quantifier, value: { kind: 'list', items: braceItems(value.text, o) } };
}

/**
 * PostgREST hands `{…}` to Postgres as an array literal (a malformed one is Postgres's 22P02);
 * Tally reads its elements itself, so a value that is not such a list is refused here.
 */
function braceItems(text: string, o: Operation): string[] {
  try {
    return parseWith(braceList, text, 'list');
  } catch {
    throw catalogue.parse(
      `filter (${o.negate ? 'not.' : ''}${o.op}(${o.quantifier}).${text})`,
      'expecting a list in "{}"',
      'Write the list as {a,b,"c,d"}; quote values holding commas or braces',
    );
  }
}

// ---- order -------------------------------------------------------------------------------

const orderEnd = alt(ahead(','), attempt(eof));
const direction = alt(
  attempt(seq([delimiter, literal('asc')], () => 'asc' as const)),
  attempt(seq([delimiter, literal('desc')], () => 'desc' as const)),
);
const nulls = alt(
  attempt(seq([delimiter, literal('nullsfirst')], () => 'first' as const)),
  attempt(seq([delimiter, literal('nullslast')], () => 'last' as const)),
);
const modifiers = seq(
  [
    optional(direction),
    alt(
      seq([optional(nulls), orderEnd], (n) => n),
      map(orderEnd, () => undefined),
    ),
  ],
  (dir, n) => ({ direction: dir, nulls: n }),
);
const term = (
  relation: string | undefined,
  f: FieldRef,
  m: { direction?: 'asc' | 'desc'; nulls?: 'first' | 'last' },
) => {
  const t: OrderTerm = { relation, field: f };
  if (m.direction) t.direction = m.direction;
  if (m.nulls) t.nulls = m.nulls;
  return t;
};
const orderParameter = seq(
  [
    sepBy1(
      lexeme(
        alt(
          attempt(
            seq([fieldName, char('('), field, char(')'), modifiers], (relation, _, f, __, m) => term(relation, f, m)),
          ),
          seq([field, modifiers], (f, m) => term(undefined, f, m)),
        ),
      ),
      char(','),
    ),
    eof,
  ],
  (terms) => terms,
);

export function parseOrder(raw: string): OrderTerm[] {
  return parseWith(orderParameter, raw, `order (${raw})`);
}

// ---- column lists ------------------------------------------------------------------------

const columnList = seq([sepBy1(fieldName, lexeme(char(','))), eof], (names) => names);

/** `a,"b c"`: the columns= and on_conflict= lists. */
export function parseColumnList(raw: string, what: string): string[] {
  return parseWith(columnList, raw, `${what} (${raw})`);
}
