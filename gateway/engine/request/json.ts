// JSON bodies, read once for every surface. JSON.parse alone keeps the last of two equal keys
// and turns every number into a double: 1e400 becomes Infinity (null when written again),
// 12345678901234567890.12 loses its last digits. So a body is parsed by JSON.parse (fast, and
// the grammar's judge), then its text is walked once more for what JSON.parse does not say: an
// object with a key twice is refused, so is nesting deeper than MAX_JSON_DEPTH, and, where the
// caller asks, a number a double cannot hold exactly. Where the engine writes JSON to SQL it sends the client's own text, which
// Postgres reads exactly (plan/write.ts, plan/routine.ts).

import { catalogue, INVALID_JSON } from '../errors/catalogue.js';

export interface JsonOptions {
  /** Refuse a number whose double differs from its text (for a surface that works on the value). */
  exactNumbers?: boolean;
}

/** A JSON text's value; invalid JSON, a repeated key or (with exactNumbers) an inexact number is a 400. */
export function parseJsonText(text: string, options: JsonOptions = {}): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw catalogue.invalidBody(INVALID_JSON);
  }
  // Text without an object or a number has nothing more to check.
  if (typeof value === 'object' && value !== null) check(text, options.exactNumbers === true);
  else if (typeof value === 'number' && options.exactNumbers && !exactInDouble(text.trim()))
    throw inexact('the body', text.trim());
  return value;
}

/** Nesting a JSON body may have: deeper bodies are refused before anything else walks them. */
export const MAX_JSON_DEPTH = 100;

export const tooDeep = () =>
  catalogue.invalidBody(
    'Invalid request body: the JSON nests too deeply',
    `at most ${MAX_JSON_DEPTH} levels of arrays and objects`,
    'Send flatter JSON',
  );

interface Frame {
  /** The keys seen so far (an object), or undefined (an array). */
  keys: Set<string> | undefined;
  /** The current key or index. */
  at: string | number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Walks valid JSON text (JSON.parse accepted it): keys once per object, numbers exact if asked. */
function check(text: string, exactNumbers: boolean): void {
  const stack: Frame[] = [];
  let expectKey = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // The closing quote: the next one after an even run of backslashes (none included).
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        let k = j - 1;
        while (text.charCodeAt(k) === BACKSLASH) k--;
        if ((j - 1 - k) % 2 === 0) break;
      }
      if (expectKey) {
        const frame = stack[stack.length - 1]!;
        const raw = text.slice(i + 1, j);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, j + 1)) as string) : raw;
        if (frame.keys!.has(key)) {
          frame.at = key;
          throw catalogue.invalidBody(
            `Invalid request body: ${pathOf(stack)} is given twice`,
            null,
            'Give each key of an object once: which of two values was meant cannot be known',
          );
        }
        frame.keys!.add(key);
        frame.at = key;
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b /* { */) {
      if (stack.push({ keys: new Set(), at: '' }) > MAX_JSON_DEPTH) throw tooDeep();
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      if (stack.push({ keys: undefined, at: 0 }) > MAX_JSON_DEPTH) throw tooDeep();
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      const frame = stack[stack.length - 1]!;
      if (frame.keys) expectKey = true;
      else frame.at = (frame.at as number) + 1;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        // digits, '.', 'e', 'E', '+', '-'
        if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d)) break;
      }
      if (exactNumbers) {
        const token = text.slice(i, j);
        if (!exactInDouble(token)) throw inexact(pathOf(stack), token);
      }
      i = j - 1;
    }
  }
}

/** Where in the body a frame stack points: `amount`, `[2].amount`, `params.arguments.amount`. */
function pathOf(stack: Frame[]): string {
  let path = '';
  for (const f of stack) path += f.keys ? (path === '' ? '' : '.') + String(f.at) : `[${f.at as number}]`;
  return path === '' ? 'the body' : path;
}

const inexact = (where: string, token: string) =>
  catalogue.invalidBody(
    `Invalid request body: ${where}: the number ${token.length > 40 ? token.slice(0, 40) + '…' : token} is out of range or has more digits than are kept`,
    null,
    'Send a number of at most 15 significant digits, within the range of the field',
  );

/**
 * Whether JSON.parse's double of a number token, written again, is the same decimal number. A
 * token of at most 15 digits always is; past that, the two decimals are compared.
 */
export function exactInDouble(token: string): boolean {
  if (token.length <= 15 && !/[eE]/.test(token)) return true;
  const d = Number(token);
  if (!Number.isFinite(d)) return false;
  return canonical(token) === canonical(String(d));
}

/** A decimal's canonical form: sign, significant digits, exponent (`-123e-2` for -1.230). */
function canonical(decimal: string): string {
  const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(decimal);
  if (!m) return decimal;
  const [, sign = '', int = '', frac = '', exp = '0'] = m;
  let digits = int + frac;
  let exponent = BigInt(exp) - BigInt(frac.length);
  digits = digits.replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += BigInt(trailing);
  return `${sign}${digits}e${exponent}`;
}
