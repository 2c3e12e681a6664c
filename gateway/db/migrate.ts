import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import type { MigrationBuilder, RunnerOption } from 'node-pg-migrate';
import { gatewayMigrationsDir, migrationsDir, policiesDir } from '../paths.js';
import { splitStatements } from './sql-statements.js';

// Schema changes are node-pg-migrate migrations in two sets, each with its own table: the
// gateway's own state (sql/gateway/: roles, schema tally, the functions the server calls), which
// any database Tally stands in front of needs, and the finance app's (sql/: its tables,
// workspaces, tokens, settings), which builds on it. RLS policies are idempotent files in
// policies/ applied after them (what a DBA edits). Both end by telling the servers to reload.
//
// Every file runs statement by statement (sql-statements.ts says why: a Citus coordinator), and
// after the app's migrations tally.place_tables() (sql/107) places the tables on a Citus
// coordinator; on plain Postgres it does nothing.

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
      migrationLoaderStrategies: [{ extensions: ['.sql'], loader: loadSqlMigrations }],
      log: () => {},
    });
    names.push(...ran.map((m) => prefix + m.name));
  }
  if (direction === 'up' && ordered.includes('app')) await placeTables(databaseUrl);
  await notifyReload(databaseUrl);
  return names;
}

type MigrationLoader = Extract<
  NonNullable<RunnerOption['migrationLoaderStrategies']>[number]['loader'],
  (paths: string[]) => unknown
>;

/** node-pg-migrate's SQL files (`-- Up Migration` / `-- Down Migration`), one step per statement. */
const loadSqlMigrations: MigrationLoader = async (filePaths) =>
  Promise.all(
    filePaths.map(async (filePath) => {
      const text = await readFile(filePath, 'utf8');
      const marker = (direction: string) => new RegExp(`^\\s*--[\\s-]*${direction}\\s+migration`, 'im');
      const up = text.search(marker('up'));
      const down = text.search(marker('down'));
      const upSql = up < 0 ? text : text.slice(up, down > up ? down : undefined);
      const downSql = down < 0 ? undefined : text.slice(down, up > down ? up : undefined);
      const steps = (part: string) => (pgm: MigrationBuilder) => {
        for (const statement of splitStatements(part)) pgm.sql(statement);
      };
      return {
        id: filePath,
        filePaths: [filePath],
        actions: { up: steps(upSql), down: downSql === undefined ? false : steps(downSql) },
      };
    }),
  );

/** Distributes the tables on a Citus coordinator (idempotent; nothing on plain Postgres). */
async function placeTables(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`SELECT tally.place_tables() WHERE to_regprocedure('tally.place_tables()') IS NOT NULL`;
    // The check and the category trigger name the shards the placement made (sql/167); asked
    // first, since a statement naming a missing function fails whatever its WHERE says.
    const [bind] = await sql<
      { present: boolean }[]
    >`SELECT to_regprocedure('tally.bind_shards()') IS NOT NULL AS present`;
    if (bind?.present) await sql`SELECT tally.bind_shards()`;
    // Then what the placed tables need on the workers: the API roles' logins and the computed
    // fields as distributed objects (sql/091, sql/108); also for a database that became a
    // coordinator after its migrations ran.
    await sql`SELECT tally.citus_api_roles() WHERE to_regprocedure('tally.citus_api_roles()') IS NOT NULL`;
  } finally {
    await sql.end();
  }
}

export async function applyPolicies(databaseUrl: string): Promise<string[]> {
  const files = (await readdir(policiesDir)).filter((f) => f.endsWith('.sql')).sort();
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      for (const file of files) {
        for (const statement of splitStatements(await readFile(join(policiesDir, file), 'utf8'))) {
          await tx.unsafe(statement);
        }
      }
    });
    // After the commit: a transaction that changed a distributed table ends in a two-phase
    // commit, which refuses one that has sent a NOTIFY.
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
  // Its own transaction: the version moves, for every server, when it commits (sql/gateway/109).
  const [moved] = await sql<
    { exists: boolean }[]
  >`SELECT to_regprocedure('tally.schema_changed()') IS NOT NULL AS exists`;
  if (moved?.exists) await sql`SELECT tally.schema_changed()`; // not before sql/gateway/109
  await sql`NOTIFY pgrst, 'reload schema'`;
}
