import postgres from 'postgres';
import fc from 'fast-check';
import { compile, InvalidLiteral, literal, sql } from '../gateway/engine/sql.js';
import { databaseUrl } from './harness/db.js';

// literal() is the one place a value becomes SQL text (SET LOCAL takes no parameter). Whatever
// the value, Postgres must read back exactly it, and nothing of it may run as SQL: under both
// settings of standard_conforming_strings, which changes what a backslash means in '…'.

describe('literal(): a value quoted for SET LOCAL', () => {
  const db = postgres(databaseUrl('postgres'), { max: 1, onnotice: () => {} });
  afterAll(() => db.end());

  const readBack = async (value: string, conforming: 'on' | 'off'): Promise<unknown> => {
    const [row] = await db.begin(async (tx) => {
      await tx.unsafe(`SET LOCAL standard_conforming_strings = ${conforming}`);
      await tx.unsafe(compile(sql`SET LOCAL tally_test.value = ${literal(value)}`).text);
      return tx`SELECT current_setting('tally_test.value') AS v`;
    });
    return row?.v;
  };

  const hostile = [
    `'; DROP TABLE pg_class; --`,
    `\\'; SELECT 1; --`,
    `\\\\'`,
    `a\\nb\\x41\\u0041`,
    `'`,
    `''`,
    `E'x'`,
    `{"workspace_id":"a'b","note":"c\\\\d\\"e"}`,
    `Ünïcødé ✓ 𝄞 سجل`,
    '',
  ];

  test.each(['on', 'off'] as const)(
    'reads back every hostile value as it was (standard_conforming_strings %s)',
    async (conforming) => {
      for (const value of hostile) await expect(readBack(value, conforming)).resolves.toBe(value);
    },
  );

  test('reads back any string without NUL as it was', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary' }).filter((s) => !s.includes('\0')),
        fc.constantFrom('on' as const, 'off' as const),
        async (value, conforming) => {
          expect(await readBack(value, conforming)).toBe(value);
        },
      ),
      { numRuns: 200 },
    );
  });

  test('refuses NUL, which Postgres cannot hold', () => {
    expect(() => literal('a\0b')).toThrow(InvalidLiteral);
  });

  test('is an escape string with backslashes and quotes doubled', () => {
    expect(compile(literal(`it's a \\ test`)).text).toBe(`E'it''s a \\\\ test'`);
  });
});
