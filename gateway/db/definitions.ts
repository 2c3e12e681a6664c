import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type postgres from 'postgres';
import { definitionKey } from './sql-sets.js';
import { splitStatements } from './sql-statements.js';

// Definition files (functions, triggers, views) are applied again whenever their text changes:
// tally_migrations.definitions records the SHA-256 of each file as last applied. Each file is
// idempotent (CREATE OR REPLACE, DROP … IF EXISTS before a CREATE), so the database runs exactly
// the text of the tree. Each file is one transaction, run statement by statement
// (sql-statements.ts says why).

const TABLE = `CREATE TABLE IF NOT EXISTS tally_migrations.definitions (
  file       text PRIMARY KEY,
  sha256     text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * Applies the files whose text differs from what was last applied, in the given order, and
 * returns their keys. `checkBodies: false` for definitions that tables need before the tables
 * exist (their bodies are checked when first called).
 */
export async function applyDefinitions(
  sql: postgres.Sql,
  files: string[],
  options: { checkBodies?: boolean } = {},
): Promise<string[]> {
  if (files.length === 0) return [];
  await sql`CREATE SCHEMA IF NOT EXISTS tally_migrations`;
  await sql.unsafe(TABLE);
  const applied = new Map(
    (await sql<{ file: string; sha256: string }[]>`SELECT file, sha256 FROM tally_migrations.definitions`).map((r) => [
      r.file,
      r.sha256,
    ]),
  );
  const changed: { key: string; text: string; sha256: string }[] = [];
  for (const file of files) {
    const text = await readFile(file, 'utf8');
    const sha256 = createHash('sha256').update(text).digest('hex');
    const key = definitionKey(file);
    if (applied.get(key) !== sha256) changed.push({ key, text, sha256 });
  }
  // A transaction per file: Citus keeps the search_path a statement left on a worker's connection
  // for the rest of the transaction (a function with SET search_path that runs DDL, as
  // track_activity), and deparses a later statement for its own path ("type funds does not
  // exist" on the worker).
  for (const { key, text, sha256 } of changed) {
    await sql.begin(async (tx) => {
      if (options.checkBodies === false) await tx`SET LOCAL check_function_bodies = off`;
      for (const statement of splitStatements(text)) await tx.unsafe(statement);
      await tx`
        INSERT INTO tally_migrations.definitions (file, sha256) VALUES (${key}, ${sha256})
        ON CONFLICT (file) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()`;
    });
  }
  return changed.map((c) => c.key);
}

/** Forgets the definitions below `prefix` (their set went down): the next up applies them again. */
export async function forgetDefinitions(sql: postgres.Sql, prefix: string): Promise<void> {
  const [exists] = await sql<{ present: boolean }[]>`
    SELECT to_regclass('tally_migrations.definitions') IS NOT NULL AS present`;
  if (exists?.present) await sql`DELETE FROM tally_migrations.definitions WHERE starts_with(file, ${prefix})`;
}

/** Each statement of the files on its own, outside any transaction (an after-migrate step). */
export async function runEach(sql: postgres.Sql, files: string[]): Promise<void> {
  for (const file of files) {
    for (const statement of splitStatements(await readFile(file, 'utf8'))) await sql.unsafe(statement);
  }
}
