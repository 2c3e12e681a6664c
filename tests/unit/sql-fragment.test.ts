import {
  catalog,
  catalogText,
  claim,
  compile,
  compiledOnce,
  empty,
  ident,
  InvalidIdentifier,
  join,
  param,
  prefixed,
  qualified,
  sql,
  text,
  withClaims,
  type Fragment,
} from '../../gateway/engine/sql.js';

describe('SQL fragments', () => {
  it('numbers parameters once, in order of appearance, across nested fragments', () => {
    const where = sql`${ident('amount')} > ${param('10')}`;
    const q = sql`SELECT ${join([ident('id'), ident('name')])} FROM ${qualified('public', 'expenses')} WHERE ${where} AND ${ident('note')} = ${text('a')}`;
    expect(compile(q)).toEqual({
      text: 'SELECT "id", "name" FROM "public"."expenses" WHERE "amount" > $1 AND "note" = $2::text',
      params: ['10', 'a'],
    });
  });

  it('keeps values out of the text, whatever they contain', () => {
    const hostile = `'; DROP TABLE expenses; --`;
    const { text: out, params } = compile(sql`SELECT ${param(hostile)}, ${param(null)}`);
    expect(out).toBe('SELECT $1, $2');
    expect(params).toEqual([hostile, null]);
  });

  it('quotes identifiers, doubling quotes, and refuses NUL', () => {
    expect(compile(ident('we"ird name')).text).toBe('"we""ird name"');
    expect(compile(ident('سجل')).text).toBe('"سجل"');
    expect(() => ident('a\0b')).toThrow(InvalidIdentifier);
  });

  it('refuses a plain string in a hole and a tag called without a template literal', () => {
    const name: unknown = 'id; DROP TABLE x';
    expect(() => sql`SELECT ${name as Fragment}`).toThrow(TypeError);
    const forged = Object.assign(['SELECT 1'], { raw: ['SELECT 1'] }) as unknown as TemplateStringsArray;
    expect(() => sql(forged)).toThrow(TypeError);
    // @ts-expect-error: a string is not a Fragment, so this does not compile
    expect(() => sql`SELECT ${'x'}`).toThrow(TypeError);
  });

  it('takes catalog text only as a branded value', () => {
    const t = catalogText('numeric(12,4)');
    expect(compile(sql`CAST(${param('1.5')} AS ${catalog(t)})`).text).toBe('CAST($1 AS numeric(12,4))');
    // @ts-expect-error: a plain string is not CatalogText
    catalog('text');
  });

  it('joins with a separator and treats an empty list as empty', () => {
    expect(compile(join([param('a'), param('b')], sql` OR `))).toEqual({ text: '$1 OR $2', params: ['a', 'b'] });
    expect(join([]).empty).toBe(true);
    expect(empty().empty).toBe(true);
    expect(sql`x`.empty).toBe(false);
  });

  it('sends a parameter used twice once, under one number, and a fresh one with an equal value apart', () => {
    const where = sql`${ident('id')} > ${param('1')}`;
    const q = sql`SELECT ${param('x')} WHERE ${where} AND (SELECT 1 WHERE ${where}) AND ${ident('id')} > ${param('1')}`;
    expect(compile(q)).toEqual({
      text: 'SELECT $1 WHERE "id" > $2 AND (SELECT 1 WHERE "id" > $2) AND "id" > $3',
      params: ['x', '1', '1'],
    });
  });

  it('puts a head without parameters before a compiled statement, and refuses one with', () => {
    const statement = compile(sql`SELECT ${param('a')}`);
    expect(prefixed(sql`EXPLAIN `, statement)).toEqual({ text: 'EXPLAIN SELECT $1', params: ['a'] });
    expect(() => prefixed(sql`EXPLAIN ${param('b')} `, statement)).toThrow(TypeError);
  });

  it('compiles a statement once and puts the values of each call where they appear, whatever they are', () => {
    // b is used before a: $1 is the second value.
    const statement = compiledOnce(2, (a, b) => sql`SELECT ${b}::int, ${a}::text, ${ident('x')}`);
    expect(statement('hello', '1')).toEqual({ text: 'SELECT $1::int, $2::text, "x"', params: ['1', 'hello'] });
    expect(statement(`'; --`, null)).toEqual({ text: 'SELECT $1::int, $2::text, "x"', params: [null, `'; --`] });
  });

  it('refuses a compiled-once statement that leaves a value out or adds one of its own', () => {
    expect(() => compiledOnce(2, (a) => sql`SELECT ${a}`)).toThrow(TypeError);
    expect(() => compiledOnce(1, (a) => sql`SELECT ${a}, ${param('fixed')}`)).toThrow(TypeError);
  });

  it('takes claim parameters from the caller when the statement runs, one parameter per claim', () => {
    const statement = compile(
      sql`SELECT ${claim('ws')}, ${param('x')}, ${claim('ws')}, ${claim('n')}, ${claim('gone')}`,
    );
    expect(statement).toEqual({
      text: 'SELECT $1, $2, $1, $3, $4',
      params: [null, 'x', null, null],
      claims: [
        { index: 0, name: 'ws' },
        { index: 2, name: 'n' },
        { index: 3, name: 'gone' },
      ],
    });
    expect(withClaims(statement, { ws: 'w-1', n: 7, gone: { nested: true } })).toEqual({
      text: 'SELECT $1, $2, $1, $3, $4',
      params: ['w-1', 'x', '7', null],
    });
    const plain = compile(sql`SELECT ${param('x')}`);
    expect(withClaims(plain, { ws: 'w-1' })).toBe(plain);
  });
});
