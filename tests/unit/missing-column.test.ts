// The 42703 of a missing column (plan/missing-column.ts): Postgres's hint of a close column,
// at a cost that does not grow with the length of the name asked for.

import { missingColumn } from '../../gateway/engine/plan/missing-column.js';
import type { Relation } from '../../gateway/engine/schema-cache/types.js';
import { present } from '../harness/present.js';
import { blogSchema } from './helpers/schema.js';

/** The blog's users table widened to `n` more columns, named like a real table's. */
function wide(n: number): Relation {
  const { users } = blogSchema();
  const like = present(users.columnList[1], 'a text column');
  const extra = Array.from({ length: n }, (_, i) => ({ ...like, name: `a_rather_long_column_name_${i}` }));
  const columnList = [...users.columnList, ...extra];
  return { ...users, columnList, columns: new Map(columnList.map((c) => [c.name, c])) };
}

test('a name close to a column gets that column as the hint, one far from all of them none', () => {
  const rel = wide(2);
  expect(missingColumn(rel, 'users', 'nme', undefined).hint).toBe(
    'Perhaps you meant to reference the column "users.name".',
  );
  expect(missingColumn(rel, 'users_1', 'a_rather_long_column_name_7', undefined).hint).toBe(
    'Perhaps you meant to reference the column "users_1.a_rather_long_column_name_0" or the column "users_1.a_rather_long_column_name_1".',
  );
  // Three as close: Postgres suggests none of them.
  expect(missingColumn(wide(3), 'users', 'a_rather_long_column_name_7', undefined).hint).toBeNull();
  expect(missingColumn(rel, 'users', 'zebra', undefined).hint).toBeNull();
});

test('a name of thousands of characters is answered at once, not compared with every column', () => {
  // Compared character by character with 200 columns, a 15,000-character name (a URL holds
  // one) took seconds of the server's one thread; no column is close to it.
  // Measured in CPU time, not wall clock: a loaded machine that leaves the test waiting for a
  // core adds to the one and not the other, and the cost that matters is the thread's.
  const rel = wide(200);
  const started = process.cpuUsage();
  const error = missingColumn(rel, 'users', 'x'.repeat(15_000), undefined);
  expect([error.code, error.hint]).toEqual(['42703', null]);
  const { user, system } = process.cpuUsage(started);
  expect((user + system) / 1000).toBeLessThan(250);
});
