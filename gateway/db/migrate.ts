import { runner } from 'node-pg-migrate';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { migrationsDir, policiesDir } from '../paths.js';

// Schema changes are node-pg-migrate migrations in sql/; RLS policies are idempotent files in
// policies/ applied after them (what a DBA edits). Both end with a schema-cache reload notice.

export async function migrate(databaseUrl: string, direction: 'up' | 'down' = 'up', count = Infinity): Promise<string[]> {
  const ran = await runner({
    databaseUrl,
    dir: migrationsDir,
    direction,
    count,
    migrationsTable: 'pgmigrations',
    migrationsSchema: 'tally_migrations',
    createMigrationsSchema: true,
    checkOrder: true,
    singleTransaction: true,
    log: () => {},
  });
  await notifyReload(databaseUrl);
  return ran.map((m) => m.name);
}

export async function applyPolicies(databaseUrl: string): Promise<string[]> {
  const files = (await readdir(policiesDir)).filter((f) => f.endsWith('.sql')).sort();
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      for (const file of files) await tx.unsafe(await readFile(join(policiesDir, file), 'utf8'));
      await tx`NOTIFY pgrst, 'reload schema'`;
    });
  } finally {
    await sql.end();
  }
  return files;
}

async function notifyReload(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`NOTIFY pgrst, 'reload schema'`;
  } finally {
    await sql.end();
  }
}
