// A small parser-combinator core with Parsec's rules, under the request grammar (grammar.ts).
// PostgREST reads its query parameters with Parsec and answers a malformed one with Parsec's own
// error: a position (line and column) and what was unexpected and expected there. Those words
// come from how Parsec combines failures, so the grammar runs on the same rules:
//
// - a parser either consumed input or did not, whether it succeeded or failed; `alt` tries the
//   next alternative only after a failure that consumed nothing, and `attempt` (Parsec's `try`)
//   turns a failure that consumed into one that did not;
// - every reply, success included, carries an error: what would have let the parser go further
//   (`many` stops at a character it could not take). Errors met without consuming are merged:
//   at the same position their messages add up, otherwise the one further on wins;
// - `label` (Parsec's <?>) replaces what was expected by one name, where nothing was consumed.
//
// Errors cost work, so a parse first runs without them (the outcome never depends on them);
// only a parameter that fails is read a second time, recording errors, to be described.
//
// Why our own and not a parser-combinator library from npm: the words of an error are the
// point, and they come from the two rules above, which the well-kept libraries do not follow.
// Parsimmon (the most used) backtracks every alternative whether it consumed or not, replaces
// what was expected with a `desc` name after input was consumed too, and reports only the
// furthest position and what was expected there, no "unexpected": Parsec's `a` then `b` or `ac`
// fails on "ac" at column 2 (unexpected "c" expecting "b") where Parsimmon succeeds, and a label
// over `ab` read on "ax" is expecting "b" in Parsec, the label's name in Parsimmon. Arcsecond,
// parjs and typescript-parsec word their errors in their own ways too; a Parsec port (bennu) is
// not maintained. Giving PostgREST's words on any of them would mean tracking consumption and
// messages around each of its parsers: this file again, with a dependency under it.

import { catalogue, type ApiError } from '../errors/catalogue.js';

/** The kinds of messages, in the order Parsec sorts them before it writes them. */
const SYS_UNEXPECT = 0;
const UNEXPECT = 1;
const EXPECT = 2;
type Message = readonly [kind: number, text: string];

interface ParseError {
  /** An index into the input. */
  readonly at: number;
  /** None: an unknown error, which any other one replaces when merged. */
  readonly msgs: readonly Message[];
}

// A reply: ok or not, consumed or not.
const EMPTY_OK = 0;
const CONSUMED_OK = 1;
const EMPTY_ERR = 2;
const CONSUMED_ERR = 3;
type Reply = 0 | 1 | 2 | 3;

/** Parse state, shared by the parsers of one run: the input, where they are, the last reply's value and error. */
class State {
  i = 0;
  v: unknown = undefined;
  e: ParseError | null = null;
  depth = 0;
  constructor(
    readonly s: string,
    /** Whether errors are recorded (the second reading of a failed parameter). */
    readonly track: boolean,
  ) {}

  fail(at: number, msgs: Message[]): ParseError | null {
    return this.track ? { at, msgs } : null;
  }
  unknown(at: number): ParseError | null {
    return this.track ? { at, msgs: [] } : null;
  }
  /** Parsec's mergeError: a known error over an unknown one, else the further one, else both. */
  merge(a: ParseError | null, b: ParseError | null): ParseError | null {
    if (!a || !b) return a ?? b;
    if (b.msgs.length === 0 && a.msgs.length > 0) return a;
    if (a.msgs.length === 0 && b.msgs.length > 0) return b;
    if (a.at === b.at) return { at: a.at, msgs: [...a.msgs, ...b.msgs] };
    return a.at > b.at ? a : b;
  }
}

/** A parser of T: it leaves its value in `st.v` and its error in `st.e`. */
export type Parser<T> = ((st: State) => Reply) & { readonly __value?: T };
type ValueOf<P> = P extends Parser<infer T> ? T : never;

/** A set of characters, with the names Parsec expects when none of them is there (none for oneOf/noneOf). */
export interface CharClass {
  test(code: number): boolean;
  expects: readonly string[];
}

const isOk = (r: Reply) => r < EMPTY_ERR;

/** The messages of a class that did not match the character at `i` (or the end). */
function noMatch(st: State, cls: CharClass, i: number): Message[] {
  const shown = i < st.s.length ? showString(String.fromCodePoint(st.s.codePointAt(i)!)) : '';
  return [[SYS_UNEXPECT, shown], ...cls.expects.map((e): Message => [EXPECT, e])];
}

const charLength = (st: State, i: number) => (st.s.codePointAt(i)! > 0xffff ? 2 : 1);

/** One character of a class: Parsec's satisfy, with its label. */
export function one(cls: CharClass): Parser<string> {
  return (st) => {
    const i = st.i;
    if (i >= st.s.length || !cls.test(st.s.codePointAt(i)!)) {
      st.e = st.track ? st.fail(i, noMatch(st, cls, i)) : null;
      return EMPTY_ERR;
    }
    st.i += charLength(st, i);
    st.v = st.s.slice(i, st.i);
    st.e = st.unknown(st.i);
    return CONSUMED_OK;
  };
}

/** `many (satisfy …)` (min 0) or `many1` (min 1) of one class, read in one loop: the text. */
export function run(cls: CharClass, min: 0 | 1): Parser<string> {
  return (st) => {
    const start = st.i;
    const s = st.s;
    let i = start;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        if (!cls.test(c)) break;
        i++;
      } else {
        const code = s.codePointAt(i)!;
        if (!cls.test(code)) break;
        i += code > 0xffff ? 2 : 1;
      }
    }
    st.e = st.track ? st.fail(i, noMatch(st, cls, i)) : null;
    if (i === start) {
      if (min === 1) return EMPTY_ERR;
      st.v = '';
      return EMPTY_OK;
    }
    st.i = i;
    st.v = s.slice(start, i);
    return CONSUMED_OK;
  };
}

/** Everything up to the end (`many anyChar`). */
export const rest: Parser<string> = (st) => {
  const start = st.i;
  st.i = st.s.length;
  st.v = st.s.slice(start);
  st.e = st.fail(st.i, [[SYS_UNEXPECT, '']]);
  return st.i > start ? CONSUMED_OK : EMPTY_OK;
};

/**
 * A literal (Parsec's `string`): its error is at the literal's first character, naming the
 * character that differed; a partial match has consumed.
 */
export function literal(lit: string): Parser<string> {
  const expected: Message = [EXPECT, showString(lit)];
  return (st) => {
    const at = st.i;
    for (let k = 0; k < lit.length; k++) {
      if (st.s.charCodeAt(at + k) !== lit.charCodeAt(k)) {
        if (st.track) {
          const j = at + k;
          const shown = j < st.s.length ? showString(String.fromCodePoint(st.s.codePointAt(j)!)) : '';
          st.e = { at, msgs: [expected, [SYS_UNEXPECT, shown]] };
        }
        return k === 0 ? EMPTY_ERR : CONSUMED_ERR;
      }
    }
    st.i = at + lit.length;
    st.v = lit;
    st.e = st.unknown(st.i);
    return lit.length > 0 ? CONSUMED_OK : EMPTY_OK;
  };
}

/** A literal in either case, letter by letter (Parsec's `char c <|> char (toUpper c)` for each). */
export function caseless(lit: string): Parser<string> {
  return (st) => {
    const at = st.i;
    for (let k = 0; k < lit.length; k++) {
      const c = st.s.charAt(at + k);
      const lower = lit.charAt(k);
      if (c !== lower && c !== lower.toUpperCase()) {
        if (st.track) {
          const j = at + k;
          const shown = j < st.s.length ? showString(String.fromCodePoint(st.s.codePointAt(j)!)) : '';
          st.e = {
            at: j,
            msgs: [
              [EXPECT, showString(lower)],
              [SYS_UNEXPECT, shown],
              [EXPECT, showString(lower.toUpperCase())],
              [SYS_UNEXPECT, shown],
            ],
          };
        }
        st.i = at;
        return k === 0 ? EMPTY_ERR : CONSUMED_ERR;
      }
    }
    st.i = at + lit.length;
    st.v = st.s.slice(at, st.i);
    st.e = st.unknown(st.i);
    return CONSUMED_OK;
  };
}

/** Parsec's `char` (of an ASCII character): that character, expected by its shown form. */
export function char(c: string): Parser<string> {
  const code = c.charCodeAt(0);
  const cls: CharClass = { test: (x) => x === code, expects: [showString(c)] };
  return (st) => {
    const i = st.i;
    if (st.s.charCodeAt(i) !== code) {
      st.e = st.track ? st.fail(i, noMatch(st, cls, i)) : null;
      return EMPTY_ERR;
    }
    st.i = i + 1;
    st.v = c;
    st.e = st.unknown(st.i);
    return CONSUMED_OK;
  };
}

/** The end of the input; Parsec names the character found there in single quotes. */
export const eof: Parser<undefined> = (st) => {
  const i = st.i;
  st.v = undefined;
  if (i >= st.s.length) {
    st.e = st.fail(i, [
      [EXPECT, 'end of input'],
      [SYS_UNEXPECT, ''],
    ]);
    return EMPTY_OK;
  }
  st.e = st.track
    ? st.fail(i, [
        [EXPECT, 'end of input'],
        [UNEXPECT, showChar(String.fromCodePoint(st.s.codePointAt(i)!))],
      ])
    : null;
  return EMPTY_ERR;
};

/** Succeeds, consuming nothing, where the next character is not of the class (Parsec's notFollowedBy of a char). */
export function notFollowedBy(cls: CharClass): Parser<undefined> {
  return (st) => {
    const i = st.i;
    st.v = undefined;
    if (i < st.s.length && cls.test(st.s.codePointAt(i)!)) {
      // Parsec reports it after the character it read.
      st.e = st.track
        ? st.fail(i + charLength(st, i), [[UNEXPECT, showChar(String.fromCodePoint(st.s.codePointAt(i)!))]])
        : null;
      return EMPTY_ERR;
    }
    st.e = st.track ? st.fail(i, noMatch(st, cls, i)) : null;
    return EMPTY_OK;
  };
}

export const pure =
  <T>(value: T): Parser<T> =>
  (st) => {
    st.v = value;
    st.e = st.unknown(st.i);
    return EMPTY_OK;
  };

/**
 * p where the input goes on with one of `starts`, else a failure that consumed nothing, without
 * running p, when errors are not recorded: p could only fail without consuming there (every way
 * of reading p starts with one of them), and the reading that records errors runs p itself.
 */
export function startingWith<T>(starts: string, p: Parser<T>): Parser<T> {
  const codes = new Set([...starts].map((c) => c.charCodeAt(0)));
  return (st) => (st.track || codes.has(st.s.charCodeAt(st.i)) ? p(st) : EMPTY_ERR);
}

/** Parsec's `try`: a failure that consumed becomes one that did not, back where it started. */
export function attempt<T>(p: Parser<T>): Parser<T> {
  return (st) => {
    const start = st.i;
    const r = p(st);
    if (r !== CONSUMED_ERR) return r;
    st.i = start;
    return EMPTY_ERR;
  };
}

/** `try (lookAhead (string lit))`: whether the input goes on with `lit`, consuming nothing. */
export function ahead(lit: string): Parser<undefined> {
  const read = literal(lit);
  return (st) => {
    const start = st.i;
    const r = read(st);
    st.i = start;
    if (!isOk(r)) return EMPTY_ERR;
    st.v = undefined;
    st.e = st.unknown(start);
    return EMPTY_OK;
  };
}

/** Parsec's <?>: where nothing was consumed, what was expected is this name. */
export function label<T>(p: Parser<T>, name: string): Parser<T> {
  return (st) => {
    const r = p(st);
    const e = st.e;
    if (e && (r === EMPTY_ERR || (r === EMPTY_OK && e.msgs.length > 0))) {
      st.e = { at: e.at, msgs: [[EXPECT, name], ...e.msgs.filter((m) => m[0] !== EXPECT)] };
    }
    return r;
  };
}

/** Parsec's <|>, over any number of alternatives. */
export function alt<P extends Parser<unknown>[]>(...ps: P): Parser<ValueOf<P[number]>> {
  return (st) => {
    const start = st.i;
    let e: ParseError | null = null;
    for (let k = 0; k < ps.length; k++) {
      const r = ps[k]!(st);
      if (r === EMPTY_ERR) {
        e = k === 0 ? st.e : st.merge(e, st.e);
        st.i = start;
        continue;
      }
      if (r === EMPTY_OK && k > 0) st.e = st.merge(e, st.e);
      return r;
    }
    st.e = e;
    return EMPTY_ERR;
  };
}

/** Parsers one after the other (a do block), their values given to `f`; at most six. */
export function seq<P extends Parser<unknown>[], R>(
  ps: [...P],
  f: (...values: { [K in keyof P]: ValueOf<P[K]> }) => R,
): Parser<R> {
  if (ps.length > 6) throw new Error('Internal invariant broken: seq() of more than six parsers');
  const apply = f as (...values: unknown[]) => R;
  // The values are kept in locals, not an array: this runs for every name of every parameter.
  return (st) => {
    let v0, v1, v2, v3, v4, v5: unknown;
    let consumed = false;
    let e: ParseError | null = null;
    for (let k = 0; k < ps.length; k++) {
      const r = ps[k]!(st);
      if (r === CONSUMED_OK) {
        consumed = true;
        e = st.e;
      } else if (r === EMPTY_OK) {
        e = k === 0 ? st.e : st.merge(e, st.e);
      } else if (r === CONSUMED_ERR) {
        return CONSUMED_ERR;
      } else {
        if (k > 0) st.e = st.merge(e, st.e);
        return consumed ? CONSUMED_ERR : EMPTY_ERR;
      }
      if (k === 0) v0 = st.v;
      else if (k === 1) v1 = st.v;
      else if (k === 2) v2 = st.v;
      else if (k === 3) v3 = st.v;
      else if (k === 4) v4 = st.v;
      else v5 = st.v;
    }
    st.v = apply(v0, v1, v2, v3, v4, v5);
    st.e = e;
    return consumed ? CONSUMED_OK : EMPTY_OK;
  };
}

export function map<T, R>(p: Parser<T>, f: (value: T) => R): Parser<R> {
  return (st) => {
    const r = p(st);
    if (isOk(r)) st.v = f(st.v as T);
    return r;
  };
}

/** p, failing as Parsec's `guard` does right after it when its value does not pass. */
export function where<T>(p: Parser<T>, pass: (value: T) => boolean): Parser<T> {
  return (st) => {
    const r = p(st);
    if (!isOk(r) || pass(st.v as T)) return r;
    st.e = st.merge(st.e, st.unknown(st.i));
    return r === CONSUMED_OK ? CONSUMED_ERR : EMPTY_ERR;
  };
}

/** Parsec's `many`; the error is that of the last, failed, try. */
export function many<T>(p: Parser<T>): Parser<T[]> {
  return (st) => {
    const out: T[] = [];
    let consumed = false;
    for (;;) {
      const r = p(st);
      if (r === CONSUMED_OK) {
        consumed = true;
        out.push(st.v as T);
      } else if (r === EMPTY_ERR) {
        st.v = out;
        return consumed ? CONSUMED_OK : EMPTY_OK;
      } else if (r === CONSUMED_ERR) {
        return CONSUMED_ERR;
      } else {
        throw new Error('Internal invariant broken: many() of a parser that reads nothing');
      }
    }
  };
}

const isBlank = (c: number) => c === 0x20 || c === 0x09;

/** Blanks (spaces, tabs) from `i` on: where they end. */
function pastBlanks(s: string, i: number): number {
  while (i < s.length && isBlank(s.charCodeAt(i))) i++;
  return i;
}

/** The error of `many (oneOf " \t")` that stopped at `i`. */
const blanksEnd = (st: State, i: number) =>
  st.track
    ? st.fail(i, [[SYS_UNEXPECT, i < st.s.length ? showString(String.fromCodePoint(st.s.codePointAt(i)!)) : '']])
    : null;

/** PostgREST's `lexeme p`: blanks, p, blanks (as `seq([many blank, p, many blank])`, in one step). */
export function lexeme<T>(p: Parser<T>): Parser<T> {
  return (st) => {
    const start = st.i;
    const before = pastBlanks(st.s, start);
    st.i = before;
    const r = p(st);
    if (r === CONSUMED_ERR) return r;
    const consumed = before > start || r === CONSUMED_OK;
    if (r === EMPTY_ERR) {
      st.e = st.merge(blanksEnd(st, before), st.e);
      return consumed ? CONSUMED_ERR : EMPTY_ERR;
    }
    // The error so far: p's, joined to the leading blanks' where p read nothing.
    let e = r === EMPTY_OK ? st.merge(blanksEnd(st, before), st.e) : st.e;
    const value = st.v;
    const after = pastBlanks(st.s, st.i);
    e = after > st.i ? blanksEnd(st, after) : st.merge(e, blanksEnd(st, after));
    st.i = after;
    st.v = value;
    st.e = e;
    return consumed || after > before ? CONSUMED_OK : EMPTY_OK;
  };
}

/** Parsec's `option x p` (`p <|> return x`), in one step. */
export function option<T, D>(fallback: D, p: Parser<T>): Parser<T | D> {
  return (st) => {
    const start = st.i;
    const r = p(st);
    if (r !== EMPTY_ERR) return r;
    st.i = start;
    st.v = fallback;
    st.e = st.merge(st.e, st.unknown(start));
    return EMPTY_OK;
  };
}

export const optional = <T>(p: Parser<T>): Parser<T | undefined> => option(undefined, p);

/** Parsec's `sepBy1 p sep` (`p` then `many (sep >> p)`), in one loop. */
export function sepBy1<T>(p: Parser<T>, sep: Parser<unknown>): Parser<T[]> {
  return (st) => {
    const first = p(st);
    if (!isOk(first)) return first;
    const out = [st.v as T];
    const e = st.e;
    let more = false; // whether a `sep p` was read
    for (;;) {
      const r = sep(st);
      if (r === CONSUMED_ERR) return CONSUMED_ERR;
      if (r === EMPTY_ERR) break;
      if (r === EMPTY_OK) throw new Error('Internal invariant broken: sepBy1() with a separator that reads nothing');
      const sepError = st.e;
      const item = p(st);
      if (item === CONSUMED_ERR) return CONSUMED_ERR;
      if (item === EMPTY_ERR) {
        st.e = st.merge(sepError, st.e);
        return CONSUMED_ERR;
      }
      if (item === EMPTY_OK) st.e = st.merge(sepError, st.e);
      out.push(st.v as T);
      more = true;
    }
    // `many` ended on the failed separator; its error joins the first item's where nothing more was read.
    if (!more) st.e = st.merge(e, st.e);
    st.v = out;
    return first === CONSUMED_OK || more ? CONSUMED_OK : EMPTY_OK;
  };
}

export const sepBy = <T>(p: Parser<T>, sep: Parser<unknown>): Parser<T[]> => option([] as T[], sepBy1(p, sep));

/**
 * p, remembering its last reply: the grammar reads a name again at the same place for each
 * alternative it tries (an alias, an embed, a column), and a reply there is always the same.
 */
export function memo<T>(p: Parser<T>): Parser<T> {
  let last: State | undefined;
  let from = -1;
  let reply: Reply = EMPTY_ERR;
  let to = 0;
  let value: unknown;
  let error: ParseError | null = null;
  return (st) => {
    if (st !== last || st.i !== from) {
      last = st;
      from = st.i;
      reply = p(st);
      to = st.i;
      value = st.v;
      error = st.e;
    }
    st.i = to;
    st.v = value;
    st.e = error;
    return reply;
  };
}

/**
 * How deeply a parameter may nest parentheses: the recursion of the parsers stays bounded. It is
 * also the most TALLY_DB_MAX_EMBED_DEPTH may be (gateway/config.ts), so that a select the
 * configuration allows is read and its depth answered by that limit's own words.
 */
export const MAX_NESTING = 100;

/** A parser defined further on (a recursive grammar), counting how deep it recurses. */
export function lazy<T>(get: () => Parser<T>): Parser<T> {
  let p: Parser<T> | undefined;
  return (st) => {
    if (++st.depth > MAX_NESTING) throw catalogue.parseTooDeep(MAX_NESTING);
    const r = (p ??= get())(st);
    st.depth--;
    return r;
  };
}

/**
 * The value p reads from the whole of `input`, or PostgREST's PGRST100 for it:
 * `"failed to parse {what}" (line L, column C)` and Parsec's unexpected/expecting details.
 */
export function parseWith<T>(p: Parser<T>, input: string, what: string): T {
  const fast = new State(input, false);
  if (isOk(p(fast))) return fast.v as T;
  const slow = new State(input, true);
  // Both readings run the same parsers; only `startingWith` lets the first fail early.
  if (isOk(p(slow))) throw new Error(`Internal invariant broken: ${what} read only when errors are recorded`);
  throw describe(slow.e ?? { at: 0, msgs: [] }, input, what);
}

function describe(e: ParseError, input: string, what: string): ApiError {
  const [line, column] = lineAndColumn(input, e.at);
  return catalogue.parseAt(what, line, column, details(e.msgs));
}

/** Parsec's position: columns count characters, a tab moves to the next multiple of 8 (plus one). */
function lineAndColumn(input: string, at: number): [number, number] {
  let line = 1;
  let column = 1;
  for (let i = 0; i < at && i < input.length; i++) {
    const c = input.charCodeAt(i);
    if (c === 0x0a) {
      line++;
      column = 1;
    } else if (c === 0x09) column += 8 - ((column - 1) % 8);
    else if (c < 0xdc00 || c > 0xdfff) column++; // the second half of a surrogate pair is the same character
  }
  return [line, column];
}

/** Parsec's showErrorMessages, on one line (PostgREST replaces its newlines by spaces). */
function details(msgs: readonly Message[]): string {
  if (msgs.length === 0) return 'unknown parse error';
  const of = (kind: number) => msgs.filter((m) => m[0] === kind).map((m) => m[1]);
  const sys = of(SYS_UNEXPECT);
  const unexpected = of(UNEXPECT);
  const parts = [
    unexpected.length > 0 || sys.length === 0 ? '' : `unexpected ${sys[0] === '' ? 'end of input' : sys[0]}`,
    listed('unexpected', unexpected),
    listed('expecting', of(EXPECT)),
  ];
  return parts.filter((p) => p !== '').join(' ');
}

function listed(prefix: string, texts: string[]): string {
  const ms = [...new Set(texts.filter((t) => t !== ''))];
  if (ms.length === 0) return '';
  const last = ms.pop()!;
  return `${prefix} ${ms.length === 0 ? last : `${ms.join(', ')} or ${last}`}`;
}

const ASCII_NAMES =
  'NUL SOH STX ETX EOT ENQ ACK a b t n v f r SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US'.split(
    ' ',
  );

/** One character as Haskell's `show` writes it inside quotes `q`. */
function escaped(c: string, q: string): string {
  const code = c.codePointAt(0)!;
  if (c === '\\') return '\\\\';
  if (c === q) return `\\${q}`;
  if (code > 0x7f) return `\\${code}`;
  if (code === 0x7f) return '\\DEL';
  if (code >= 0x20) return c;
  return `\\${ASCII_NAMES[code]}`;
}

/** Haskell's `show` of a string: "…". */
function showString(text: string): string {
  let out = '"';
  for (const c of text) out += escaped(c, '"');
  return out + '"';
}

/** Haskell's `show` of a character: '…'. */
const showChar = (c: string): string => `'${escaped(c, "'")}'`;
