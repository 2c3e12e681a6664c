// PostgREST's query grammar: select trees, filter values, logic trees and order terms.
// Pure functions from strings to the types of ./types.ts; every failure is a PGRST100 whose
// hint points at the part that could not be read.

import { catalogue, type ApiError } from '../errors.js';
import { group } from '../invariant.js';
import { OPERATOR_NAMES, OPERATORS, QUANTIFIABLE, isOperator } from '../operators.js';
import {
  AGGREGATES,
  type AggregateFn,
  type Condition,
  type FieldRef,
  type Filter,
  type FilterValue,
  type JsonStep,
  type OrderTerm,
  type SelectItem,
} from './types.js';

/**
 * Postgres cannot hold NUL in a name (PostgREST cuts names there): a name with one is refused
 * here, before any SQL exists, rather than sent and answered by a broken connection.
 */
function refuseNul(name: string, what: string): string {
  if (name.includes('\0')) {
    throw catalogue.parse(what, 'a name contains the NUL character (%00)', 'Names cannot contain NUL; remove it');
  }
  return name;
}

function grammarError(what: string, raw: string, pos: number, expected: string): ApiError {
  const at = raw.slice(pos, pos + 30);
  return catalogue.parse(
    `${what} (${raw})`,
    at === ''
      ? `unexpected end of input, expecting ${expected}`
      : `unexpected "${at[0]}" at position ${pos}, expecting ${expected}`,
    at === '' ? `The ${what} ends too early` : `The problem starts at: ${at}`,
  );
}

/** A tiny cursor over a string, for the recursive-descent parsers below. */
class Cursor {
  pos = 0;
  constructor(
    readonly raw: string,
    readonly what: string,
  ) {}
  peek(n = 0): string {
    return this.raw[this.pos + n] ?? '';
  }
  startsWith(s: string): boolean {
    return this.raw.startsWith(s, this.pos);
  }
  done(): boolean {
    return this.pos >= this.raw.length;
  }
  fail(expected: string): never {
    throw grammarError(this.what, this.raw, this.pos, expected);
  }
  expect(s: string): void {
    if (!this.startsWith(s)) this.fail(`"${s}"`);
    this.pos += s.length;
  }
  /**
   * An identifier: a double-quoted name or a run of characters without grammar meaning. Spaces
   * inside a name belong to it (`full name`), around it they do not, as in PostgREST.
   */
  name(stop: RegExp = /[,()!:."\t\n\r]/): string {
    if (this.peek() === '"') {
      this.pos++;
      let out = '';
      while (!this.done() && this.peek() !== '"') {
        if (this.peek() === '\\' && this.pos + 1 < this.raw.length) this.pos++;
        out += this.peek();
        this.pos++;
      }
      this.expect('"');
      if (out === '') this.fail('a name');
      return refuseNul(out, this.what);
    }
    while (this.peek() === ' ') this.pos++;
    const start = this.pos;
    while (!this.done() && !stop.test(this.peek()) && !this.startsWith('->')) this.pos++;
    const name = this.raw.slice(start, this.pos).trimEnd();
    if (name === '') this.fail('a name');
    return refuseNul(name, this.what);
  }
}

function jsonPath(c: Cursor): JsonStep[] {
  const steps: JsonStep[] = [];
  while (c.startsWith('->')) {
    const arrow = c.startsWith('->>') ? '->>' : '->';
    c.pos += arrow.length;
    // A key may hold punctuation (`data->!@#$%^&*_d`); it ends where the grammar goes on.
    const start = c.pos;
    const quoted = c.peek() === '"';
    const key = c.name(/[,():.\t\n\r]/);
    // An unquoted one that starts with "-" is a negative array index, as PostgREST reads paths:
    // digits follow.
    if (!quoted && key.startsWith('-') && !/^-\d+$/.test(key)) {
      c.pos = start + 1;
      c.fail('a digit');
    }
    steps.push(!quoted && /^-?\d+$/.test(key) ? { arrow, key, index: true } : { arrow, key });
  }
  return steps;
}

function field(c: Cursor): FieldRef {
  const name = c.name();
  return { name, json: jsonPath(c) };
}

// ---- select ----------------------------------------------------------------------------

export function parseSelect(raw: string): SelectItem[] {
  const c = new Cursor(raw, 'select parameter');
  if (raw.trim() === '') return [{ kind: 'star' }];
  const items = selectList(c, false);
  if (!c.done()) c.fail('"," or the end of the select');
  return items;
}

function selectList(c: Cursor, nested: boolean): SelectItem[] {
  const items: SelectItem[] = [];
  for (;;) {
    while (c.peek() === ' ') c.pos++;
    if (nested && c.peek() === ')' && items.length === 0) return items; // embed(): no columns
    items.push(selectItem(c));
    while (c.peek() === ' ') c.pos++;
    if (c.peek() !== ',') return items;
    c.pos++;
  }
}

/** `::type`, after a column or an aggregate. */
function castOf(c: Cursor): string | undefined {
  if (!c.startsWith('::')) return undefined;
  c.pos += 2;
  const start = c.pos;
  while (!c.done() && /[A-Za-z0-9_ [\]]/.test(c.peek())) c.pos++;
  const cast = c.raw.slice(start, c.pos).trim();
  if (cast === '') c.fail('a type name after "::"');
  return cast;
}

const aggregateSet = new Set<string>(AGGREGATES);

function selectItem(c: Cursor): SelectItem {
  if (c.peek() === '*') {
    c.pos++;
    return { kind: 'star' };
  }
  let spread = false;
  if (c.startsWith('...')) {
    c.pos += 3;
    spread = true;
  }
  let alias: string | undefined;
  let name = c.name();
  if (c.peek() === ':' && c.peek(1) !== ':') {
    c.pos++;
    alias = name;
    name = c.name();
  }
  if (!spread && name === 'count' && c.startsWith('()')) {
    c.pos += 2;
    return { kind: 'count', alias, cast: castOf(c) };
  }
  if (spread && c.peek() !== '!' && c.peek() !== '(') c.fail('"(" after the spread relation');
  if (c.peek() === '!' || c.peek() === '(') {
    let hint: string | undefined;
    let inner = false;
    while (c.peek() === '!') {
      c.pos++;
      const word = c.name();
      if (word === 'inner') inner = true;
      else if (word === 'left') inner = false;
      else if (hint === undefined) hint = word;
      else c.fail('"inner", "left" or "(" after the hint');
    }
    c.expect('(');
    const select = selectList(c, true);
    c.expect(')');
    return { kind: 'embed', name, alias, hint, inner, spread, select };
  }
  const json = jsonPath(c);
  const cast = castOf(c);
  if (c.peek() === '.') {
    c.pos++;
    const fn = c.name();
    if (!aggregateSet.has(fn)) {
      c.pos -= fn.length;
      c.fail(`an aggregate function (${AGGREGATES.join(', ')}) followed by "()"`);
    }
    c.expect('()');
    return {
      kind: 'field',
      field: { name, json },
      alias,
      cast,
      aggregate: fn as AggregateFn,
      aggregateCast: castOf(c),
    };
  }
  return { kind: 'field', field: { name, json }, alias, cast };
}

// ---- filters ---------------------------------------------------------------------------

/**
 * Splits a list on top-level commas, honouring parentheses, double quotes and array literals
 * (`arr.cs.{1,2}` inside a logic tree is one element, as in PostgREST).
 */
export function splitTopLevel(raw: string, what: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let braces = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
      continue;
    }
    if (ch === '"') quoted = true;
    else if (ch === '{') braces++;
    else if (ch === '}' && braces > 0) braces--;
    else if (ch === '(') depth++;
    else if (ch === ')') {
      depth--;
      if (depth < 0) throw grammarError(what, raw, i, 'a matching "("');
    } else if (ch === ',' && depth === 0 && braces === 0) {
      parts.push(raw.slice(start, i));
      start = i + 1;
    }
  }
  if (quoted) throw grammarError(what, raw, raw.length, 'a closing double quote');
  if (depth !== 0) throw grammarError(what, raw, raw.length, '")"');
  parts.push(raw.slice(start));
  return parts;
}

/** A value as PostgREST reads it inside lists and logic trees: "quoted" with \ escapes, or bare. */
function unquote(raw: string): string {
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')) {
    return raw.slice(1, -1).replace(/\\(.)/g, '$1');
  }
  return raw;
}

/** `[not.]op[(any|all)].value` or `fts(lang).value`, the right side of a filter. */
export function parseOperation(raw: string, field: FieldRef, what: string, inLogic: boolean): Filter {
  let rest = raw;
  let negate = false;
  if (rest.startsWith('not.')) {
    negate = true;
    rest = rest.slice(4);
  }
  const m = /^([a-z]+)(?:\(([^)]*)\))?\.([\s\S]*)$/.exec(rest);
  const op = m?.[1];
  if (!m || op === undefined || !isOperator(op)) {
    const offset = raw.length - rest.length;
    throw catalogue.parse(
      `filter (${raw})`,
      `unknown operator at position ${offset}`,
      `Write the filter as <column>=<operator>.<value> with an operator among: ${OPERATOR_NAMES.join(', ')}; the problem starts at: ${rest.slice(0, 30)}`,
    );
  }
  const rule = OPERATORS[op];
  const modifier = m[2];
  const tail = group(m, 3);
  let text = tail;
  if (inLogic) text = unquote(text);
  let value: FilterValue;
  let quantifier: 'any' | 'all' | undefined;
  if (rule.shape === 'search') {
    if (modifier !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(modifier)) {
      throw grammarError(`filter (${what})`, raw, raw.indexOf('(') + 1, 'a text search configuration name');
    }
    value = { kind: 'fts', language: modifier, text };
  } else if (modifier !== undefined) {
    if ((modifier !== 'any' && modifier !== 'all') || !QUANTIFIABLE.includes(op)) {
      throw grammarError(
        `filter (${what})`,
        raw,
        raw.indexOf('(') + 1,
        `"any" or "all" (with ${QUANTIFIABLE.join(', ')})`,
      );
    }
    quantifier = modifier;
    value = { kind: 'list', items: listItems(tail, raw, '{', '}') };
  } else if (rule.shape === 'list') {
    value = { kind: 'list', items: listItems(tail, raw, '(', ')') };
  } else if (rule.shape === 'keyword') {
    const v = text.toLowerCase();
    if (!Object.hasOwn(rule.values, v)) {
      throw catalogue.parse(
        `filter (${raw})`,
        `unexpected "${text}"`,
        `The "${op}" operator takes one of: ${Object.keys(rule.values).join(', ')}`,
      );
    }
    value = { kind: 'is', value: v as keyof typeof rule.values };
  } else {
    value = { kind: 'scalar', text };
  }
  return { field, negate, op, quantifier, value };
}

function listItems(raw: string, whole: string, open: string, close: string): string[] {
  const t = raw.trim();
  if (!t.startsWith(open) || !t.endsWith(close)) {
    throw catalogue.parse(
      `filter (${whole})`,
      `expecting a list in "${open}${close}"`,
      `Write the list as ${open}a,b,"c,d"${close}; quote values holding commas or parentheses`,
    );
  }
  const inner = t.slice(1, -1);
  // An empty list, blanks included (`in.(   )`), matches nothing.
  if (inner.trim() === '') return [];
  return listElements(inner);
}

/**
 * The elements of a list as PostgREST reads them: an element is "quoted" (with \ escapes) only
 * when its closing quote ends it; otherwise it is bare text up to the next comma outside
 * parentheses or braces, in which a double quote is a character like any other (`in.(")`,
 * `in.(Double"Quote")`).
 */
function listElements(inner: string): string[] {
  const items: string[] = [];
  let i = 0;
  for (;;) {
    const start = pastBlanks(inner, i);
    const closing = inner[start] === '"' ? quotedEnd(inner, start) : -1;
    const after = closing < 0 ? -1 : pastBlanks(inner, closing);
    if (after >= 0 && (after === inner.length || inner[after] === ',')) {
      items.push(unquote(inner.slice(start, closing)));
      i = after;
    } else {
      const end = bareEnd(inner, start);
      items.push(inner.slice(start, end).trim());
      i = end;
    }
    if (i >= inner.length) return items;
    i++; // the comma
  }
}

/** The index of the first character at or after `i` that is not white space (as trim() sees it). */
function pastBlanks(s: string, i: number): number {
  while (i < s.length && s[i]!.trim() === '') i++;
  return i;
}

/** The index just past the double quote that closes the one at `open`, or -1. */
function quotedEnd(s: string, open: number): number {
  for (let i = open + 1; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === '"') return i + 1;
  }
  return -1;
}

/** Where a bare element that starts at `start` ends: the next comma outside () and {}. */
function bareEnd(s: string, start: number): number {
  let depth = 0;
  for (let i = start; i < s.length; i++) {
    const ch = s[i];
    if (ch === '(' || ch === '{') depth++;
    else if ((ch === ')' || ch === '}') && depth > 0) depth--;
    else if (ch === ',' && depth === 0) return i;
  }
  return s.length;
}

/** A field with an optional JSON path, as written on the left of a filter. */
export function parseField(raw: string, what: string): FieldRef {
  const c = new Cursor(raw, what);
  const f = field(c);
  if (!c.done()) c.fail('"->", "->>" or the end of the column');
  return f;
}

/** `(a.eq.1,or(b.gt.2,c.is.null))`: the value of an or=/and= parameter. */
export function parseLogic(op: 'and' | 'or', negate: boolean, raw: string): Condition {
  const t = withoutExtraCloses(raw.trim());
  if (!t.startsWith('(') || !t.endsWith(')')) {
    throw catalogue.parse(`logic tree (${raw})`, 'expecting "(" … ")"', `Write it as ${op}=(column.operator.value,…)`);
  }
  return { kind: 'logic', op, negate, children: logicChildren(t.slice(1, -1), raw, `${negate ? 'not.' : ''}${op}`) };
}

/**
 * A tree closed more often than it was opened (`(a.eq.1,b.neq.2))`) reads as PostgREST reads
 * it: the closes past the last opening are ignored. Anything else after the tree stays an error.
 */
function withoutExtraCloses(t: string): string {
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < t.length; i++) {
    const ch = t[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === '(') depth++;
    else if (ch === ')' && --depth === 0 && /^\)+$/.test(t.slice(i + 1))) return t.slice(0, i + 1);
  }
  return t;
}

/** The element PostgREST's parser expects first inside a tree's parentheses. */
const LOGIC_ELEMENT = 'field name (* or [a..z0..9_$]), negation operator (not) or logic operator (and, or)';

/** `key` is the parameter's name (`or`, `not.and`), which PostgREST parses with the value. */
function logicChildren(inner: string, whole: string, key: string, part = whole): Condition[] {
  if (inner.trim() === '') {
    // PostgREST's words and place: the column (1-based) of the ")" in `or(…)` as it parses it,
    // the parameter's name and value joined.
    const open = whole.indexOf(part) + part.indexOf('(');
    const close = open + 1 + (whole.slice(open + 1).length - whole.slice(open + 1).trimStart().length);
    throw catalogue.parseAt(
      `logic tree (${whole})`,
      key.length + close + 1,
      `unexpected ")" expecting ${LOGIC_ELEMENT}`,
    );
  }
  return splitTopLevel(inner, 'logic tree').map((part) => {
    const p = part.trim();
    // Whitespace may stand between a nested tree's operator and its parenthesis: `and ( … )`.
    const m = /^(not\.)?(and|or)\s*\(([\s\S]*)\)$/.exec(p);
    if (m)
      return {
        kind: 'logic',
        op: m[2] as 'and' | 'or',
        negate: m[1] !== undefined,
        children: logicChildren(group(m, 3), whole, key, p),
      };
    const dot = p.indexOf('.');
    if (dot <= 0) {
      throw catalogue.parse(
        `logic tree (${whole})`,
        `unexpected "${p.slice(0, 30)}"`,
        'Each element is column.operator.value, and(…) or or(…)',
      );
    }
    // The field ends at the first dot that is not inside a quoted name.
    let end = dot;
    if (p.startsWith('"')) {
      const close = p.indexOf('"', 1);
      end = close > 0 ? p.indexOf('.', close) : -1;
      if (end < 0) throw grammarError('logic tree', whole, 0, 'a column');
    }
    const f = parseField(p.slice(0, end), 'logic tree');
    return { kind: 'filter', filter: parseOperation(p.slice(end + 1), f, p, true) };
  });
}

// ---- order -------------------------------------------------------------------------------

export function parseOrder(raw: string): OrderTerm[] {
  return splitTopLevel(raw, 'order').map((part) => {
    const c = new Cursor(part.trim(), 'order');
    let relation: string | undefined;
    let f = field(c);
    if (c.peek() === '(') {
      if (f.json.length > 0) c.fail('"." after the column');
      relation = f.name;
      c.pos++;
      f = field(c);
      c.expect(')');
    }
    const term: OrderTerm = { relation, field: f };
    while (c.peek() === '.') {
      c.pos++;
      const word = c.name();
      if (word === 'asc' || word === 'desc') {
        if (term.direction) c.fail('nullsfirst or nullslast');
        term.direction = word;
      } else if (word === 'nullsfirst' || word === 'nullslast') {
        if (term.nulls) c.fail('the end of the term');
        term.nulls = word === 'nullsfirst' ? 'first' : 'last';
      } else {
        c.pos -= word.length;
        c.fail('asc, desc, nullsfirst or nullslast');
      }
    }
    if (!c.done()) c.fail('"." or ","');
    return term;
  });
}

/** `a,"b c"`: the columns= and on_conflict= lists. */
export function parseColumnList(raw: string, what: string): string[] {
  return splitTopLevel(raw, what).map((p) => {
    const name = unquote(p.trim());
    if (name === '') throw grammarError(what, raw, 0, 'a column name');
    return refuseNul(name, what);
  });
}
