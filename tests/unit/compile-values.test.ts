// Values only ever become parameters: whatever a client writes as a filter value, a list item,
// a JSON key, a body or an argument, the statement's text is the text a harmless value gives,
// and the value is in the parameter list. Output names the client chooses (aliases) reach the
// text only as quoted identifiers. fast-check generates the hostile inputs.

import fc from 'fast-check';
import { compile, ident as identFragment } from '../../gateway/engine/sql.js';
import { compileRead, compileRoutine, compileWrite, type Call } from './helpers/pipeline.js';
import { OPERATORS, operatorsOf } from '../../gateway/engine/operators.js';

const ident = (name: string) => compile(identFragment(name)).text;

/** Strings built to break out of SQL: quotes, comments, dollar quoting, parameter markers, grammar characters. */
const SEEDS = [
  `'; DROP TABLE blog.posts; --`,
  `" OR 1=1 --`,
  `$1`,
  `$$ || pg_sleep(10) || $$`,
  `\\`,
  `E'\\x27'`,
  `*/ SELECT 1 /*`,
  `"pgrst_0"`,
  `) OR (TRUE`,
  `,`,
  `.`,
  `(`,
  `)`,
  `{`,
  `}`,
  `"`,
  `'`,
  `eq.1`,
  `not.is.null`,
  `->>`,
  `::text`,
  `%`,
  `*`,
  `\n`,
  ' ',
];
const hostile: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...SEEDS),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
  fc
    .tuple(fc.constantFrom(...SEEDS), fc.string({ unit: 'grapheme', maxLength: 10 }), fc.constantFrom(...SEEDS))
    .map(([a, b, c]) => a + b + c),
);
const BENIGN = 'x';
const RUNS = { numRuns: 100 };

/** A value written inside a list or logic tree: double-quoted, with \ escapes. */
const quoted = (v: string) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/** Every operator with one value (not in's list, not is's keyword), and text searches with a language. */
const SCALAR_OPS = [...operatorsOf('compare', 'pattern', 'binary', 'search'), 'fts(english)', 'wfts(simple)'];
const COLUMNS = [
  'title',
  'id',
  'rating',
  'tags',
  'active',
  'search',
  'meta',
  'meta->>lang',
  'meta->a->b',
  'title_upper',
];

/** The text and params of GET /posts with these query pairs. */
const read = (query: [string, string][], extra: Partial<Call> = {}) => compileRead('posts', { query, ...extra }).main;

describe('client values reach SQL only as parameters', () => {
  it('filter values of every operator family, negated or not', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...COLUMNS),
        fc.constantFrom(...SCALAR_OPS),
        fc.boolean(),
        hostile,
        (column, op, negate, v) => {
          const q = (value: string): [string, string][] => [[column, `${negate ? 'not.' : ''}${op}.${value}`]];
          const bad = read(q(v));
          const good = read(q(BENIGN));
          expect(bad.text).toBe(good.text);
          expect(bad.params.length).toBe(good.params.length);
          const rule = OPERATORS[op.replace(/\(.*/, '') as keyof typeof OPERATORS];
          const sent = 'wildcard' in rule && rule.wildcard ? v.replace(/\*/g, '%') : v;
          expect(bad.params).toContain(sent);
        },
      ),
      RUNS,
    );
  });

  it('items of in lists and any/all lists', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('title', 'id', 'tags', 'meta->>lang'),
        fc.constantFrom('in', 'eq(any)', 'lt(all)', 'ilike(any)'),
        fc.array(hostile, { minLength: 1, maxLength: 4 }),
        (column, op, items) => {
          const [open, close] = op === 'in' ? ['(', ')'] : ['{', '}'];
          const q = (list: string[]): [string, string][] => [
            [column, `${op}.${open}${list.map(quoted).join(',')}${close}`],
          ];
          const bad = read(q(items));
          expect(bad.text).toBe(read(q(items.map(() => BENIGN))).text);
          expect(bad.params.join('')).not.toBe('');
        },
      ),
      RUNS,
    );
  });

  it('values inside or/and logic trees, nested and negated', () => {
    fc.assert(
      fc.property(hostile, hostile, fc.constantFrom('or', 'and', 'not.or'), (v, w, key) => {
        const q = (a: string, b: string): [string, string][] => [
          [key, `(title.eq.${quoted(a)},and(id.not.in.(${quoted(b)}),body.ilike.${quoted(a)}))`],
        ];
        const bad = read(q(v, w));
        expect(bad.text).toBe(read(q(BENIGN, BENIGN)).text);
        expect(bad.params).toContain(v);
      }),
      RUNS,
    );
  });

  it('JSON keys of filters, order and select', () => {
    // An integer key is an array index (::int4 is added to its parameter); a key with NUL is
    // refused by the parser (400) before any SQL exists.
    const key = hostile.filter((k) => !/^-?\d+$/.test(k) && !k.includes('\0'));
    fc.assert(
      fc.property(key, hostile, (k, v) => {
        const q = (kk: string, vv: string): [string, string][] => [
          ['select', `id,j:meta->${quoted(kk)}`],
          [`meta->${quoted(kk)}->>${quoted(kk)}`, `eq.${vv}`],
          ['order', `meta->>${quoted(kk)}.desc`],
        ];
        const bad = read(q(k, v));
        expect(bad.text).toBe(read(q(BENIGN, BENIGN)).text);
        expect(bad.params).toEqual([k, k, k, v, k]);
      }),
      RUNS,
    );
  });

  it('offsets are parameters; a limit is a number in the text, nothing else', () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (limit, offset) => {
        const bad = read([
          ['limit', String(limit)],
          ['offset', String(offset + 1)],
          ['select', 'id,comments(id)'],
          ['comments.limit', String(limit)],
        ]);
        const one = read([
          ['limit', '1'],
          ['offset', '1'],
          ['select', 'id,comments(id)'],
          ['comments.limit', '1'],
        ]).text;
        expect(bad.text).toBe(one.replaceAll('LIMIT 1', `LIMIT ${limit}`));
      }),
      RUNS,
    );
    // What is not a count never becomes one: the parser refuses it first.
    for (const limit of ['1;select', '1e3', '0x10', '1.5', '9999999999999999'])
      expect(() => read([['limit', limit]])).toThrow();
  });

  it('bodies and filters of writes, and arguments of functions', () => {
    fc.assert(
      fc.property(hostile, hostile, (v, w) => {
        const patch = (a: string, b: string) =>
          compileWrite('posts', {
            method: 'PATCH',
            query: [
              ['id', `eq.${a}`],
              ['title', `like.${b}`],
            ],
            body: { title: a, body: b },
          });
        expect(patch(v, w).text).toBe(patch(BENIGN, BENIGN).text);
        expect(patch(v, w).params[1]).toBe(v); // after the body, which the text names first
        const post = (a: string) =>
          compileWrite('tags', {
            method: 'POST',
            body: [
              { id: 1, name: a },
              { id: 2, name: a },
            ],
            headers: { Prefer: 'return=representation, resolution=merge-duplicates' },
          });
        expect(post(v).text).toBe(post(BENIGN).text);
        expect(JSON.parse(post(v).params[0]!)).toEqual([
          { id: 1, name: v },
          { id: 2, name: v },
        ]);
        const rpc = (a: string) =>
          compileRoutine('posts_by', {
            // An argument's value never reads as a filter here (no operator starts with x).
            query: [
              ['author', `x${a}`],
              ['title', `eq.${a}`],
            ],
          }).main;
        expect(rpc(v).text).toBe(rpc(BENIGN).text);
        expect(rpc(v).params).toEqual([JSON.stringify({ author: `x${v}` }), v]);
        const single = (a: string) => compileRoutine('echo', { method: 'POST', body: { [a]: a } }).main;
        expect(single(v).text).toBe(single(BENIGN).text);
      }),
      RUNS,
    );
  });
});

describe('client output names reach SQL only as quoted identifiers', () => {
  // NUL is left out: a NUL in an alias is a separate question (the parser refuses it before ident() would).
  const name = hostile.filter((s) => !s.includes('\0'));
  it('aliases of columns, embeds and JSON paths', () => {
    const B = 'benign_alias';
    fc.assert(
      fc.property(name, (a) => {
        const alias = quoted(a);
        for (const select of [
          (n: string) => `${n}:id`,
          (n: string) => `${n}:users!author_id(name)`,
          (n: string) => `id,${n}:meta->>lang`,
        ]) {
          const bad = compileRead('posts', { query: [['select', select(alias)]] }).main;
          const good = compileRead('posts', { query: [['select', select(B)]] }).main;
          expect(bad.text).toBe(good.text.split(ident(B)).join(ident(a)));
          expect(bad.params).toEqual(good.params);
        }
      }),
      RUNS,
    );
  });
});
