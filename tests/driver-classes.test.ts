import { setFlagsFromString } from 'node:v8';
import postgres from 'postgres';
import { createPool } from '../gateway/engine/pool.js';
import { databaseUrl } from './harness/db.js';
import { waitFor } from './harness/wait.js';

// postgres.js's Query and Result constructors, declared with a static Symbol.species getter,
// start in V8's dictionary mode, where every function constructing them is compiled, thrown
// away and compiled again for the life of the process (gateway/engine/driver-classes.ts). The
// pool puts them in fast mode. V8's own view of an object's properties is read with one of its
// intrinsics, allowed for the functions this file makes.

setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: unknown) => boolean;

describe("postgres.js's classes in V8", () => {
  const sql = postgres(databaseUrl('postgres'), { max: 1, onnotice: () => {} });
  afterAll(() => sql.end());

  test('Query and Result start in dictionary mode, and the server pool puts both in fast mode', async () => {
    const Query = sql.unsafe('SELECT 1').constructor; // never awaited, so never sent
    const Result = (await sql.unsafe('SELECT 1')).constructor;
    // Should these two fail after a Node upgrade, V8 no longer has the flaw: delete driver-classes.ts.
    expect(hasFastProperties(Query)).toBe(false);
    expect(hasFastProperties(Result)).toBe(false);

    const pool = createPool(databaseUrl('postgres'), {
      size: 1,
      acquireTimeoutMs: 5000,
      perKey: 1,
      client: { onnotice: () => {} },
    });
    try {
      expect(hasFastProperties(Query)).toBe(true); // at once
      await waitFor(() => hasFastProperties(Result), "Result in fast mode, after the pool's first answer");
    } finally {
      await pool.end();
    }
    // The classes behave as before: a query is still a thenable that runs when awaited, and
    // its rows are a plain array for map() and friends.
    const rows = await sql.unsafe<{ n: number }[]>('SELECT 2 AS n');
    expect(rows.map((r) => r.n)).toEqual([2]);
    expect(rows.map((r) => r.n).constructor).toBe(Array);
    expect(rows.count).toBe(1);
  });
});
