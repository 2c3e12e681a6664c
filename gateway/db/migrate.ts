import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { gatewayMigrationsDir, migrationsDir, policiesDir } from '../paths.js';

// Schema changes are node-pg-migrate migrations in two sets, each with its own table: the
// gateway's own state (sql/gateway/: roles, schema tally, the functions the server calls), which
// any database Tally stands in front of needs, and the finance app's (sql/: its tables,
// workspaces, tokens, settings), which builds on it. RLS policies are idempotent files in
// policies/ applied after them (what a DBA edits). Both end by telling the servers to reload.

export type MigrationSet = 'gateway' | 'app';

const SETS: Record<MigrationSet, { dir: string; table: string; prefix: string }> = {
  gateway: { dir: gatewayMigrationsDir, table: 'gateway_migrations', prefix: 'gateway/' },
  // The app's table keeps the name it had when it was the only set, so that a database
  // migrated then knows what it has.
  app: { dir: migrationsDir, table: 'pgmigrations', prefix: '' },
};

/**
 * Runs the sets in order, up: the gateway's first; down: in reverse, `count` migrations in
 * all. Returns the names run, the gateway's prefixed with "gateway/".
 */
export async function migrate(
  databaseUrl: string,
  direction: 'up' | 'down' = 'up',
  count = Infinity,
  sets: MigrationSet[] = ['gateway', 'app'],
): Promise<string[]> {
  const ordered = (['gateway', 'app'] as const).filter((s) => sets.includes(s));
  if (direction === 'down') ordered.reverse();
  const names: string[] = [];
  // Loaded here, not at start: with its own Postgres driver it is megabytes a server never uses.
  const { runner } = await import('node-pg-migrate');
  for (const set of ordered) {
    if (names.length >= count) break;
    const { dir, table, prefix } = SETS[set];
    const ran = await runner({
      databaseUrl,
      dir,
      direction,
      count: count - names.length,
      migrationsTable: table,
      migrationsSchema: 'tally_migrations',
      createMigrationsSchema: true,
      checkOrder: true,
      singleTransaction: true,
      log: () => {},
    });
    names.push(...ran.map((m) => prefix + m.name));
  }
  await notifyReload(databaseUrl);
  return names;
}

export async function applyPolicies(databaseUrl: string): Promise<string[]> {
  const files = (await readdir(policiesDir)).filter((f) => f.endsWith('.sql')).sort();
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      for (const file of files) await tx.unsafe(await readFile(join(policiesDir, file), 'utf8'));
    });
    await schemaChanged(sql);
  } finally {
    await sql.end();
  }
  return files;
}

async function notifyReload(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await schemaChanged(sql);
  } finally {
    await sql.end();
  }
}

/**
 * Tells every server that the schema changed: the change version they poll (which the event
 * trigger of sql/gateway/095 moves by itself when the migrating role could create it), and
 * NOTIFY pgrst for the servers that listen.
 */
export async function schemaChanged(sql: postgres.Sql): Promise<void> {
  await sql`SELECT nextval(to_regclass('tally.schema_version'))`; // null before sql/gateway/095
  await sql`NOTIFY pgrst, 'reload schema'`;
}
