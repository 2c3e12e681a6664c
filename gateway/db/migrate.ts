import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import type { MigrationBuilder, RunnerOption } from 'node-pg-migrate';
import { policiesDir } from '../paths.js';
import { applyDefinitions, forgetDefinitions, runEach } from './definitions.js';
import { refuseUnisolated, type IsolationRule } from './isolation-rule.js';
import { extensions, SETS, type Extension, type MigrationSet, type SetFiles } from './sql-sets.js';
import { schemaChanged } from './schema-changed.js';
import { adoptSquashed } from './squashed.js';
import { splitStatements } from './sql-statements.js';

// `tally migrate`, in one step: for each set (sql-sets.ts), its early definitions, its pending
// migrations, its definitions; then the RLS policies of policies/ (what a DBA edits), the
// extensions' after-migrate steps, and a last check that every tenant table is isolated. It ends
// by telling the servers to reload, and waits until the running ones serve the change
// (schema-changed.ts). Every file runs statement by statement (sql-statements.ts
// says why: a Citus coordinator).

export type { MigrationSet } from './sql-sets.js';

export interface MigrateOptions {
  /** The tables that must be isolated when the run ends (the server's configuration). */
  isolation?: Partial<IsolationRule>;
}

/**
 * Runs the sets in order, up: the gateway's first; down: in reverse, `count` migrations in
 * all. Returns the migrations run, the gateway's prefixed with "gateway/". Definitions,
 * policies and extensions are applied once every migration of the sets has run.
 */
export async function migrate(
  databaseUrl: string,
  direction: 'up' | 'down' = 'up',
  count = Infinity,
  sets: MigrationSet[] = ['gateway', 'app'],
  options: MigrateOptions = {},
): Promise<string[]> {
  const ordered = (['gateway', 'app'] as const).filter((s) => sets.includes(s)).map((s) => SETS[s]);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const names =
      direction === 'up'
        ? await up(sql, databaseUrl, ordered, count, options)
        : await down(sql, databaseUrl, ordered.reverse(), count);
    await schemaChanged(sql);
    return names;
  } finally {
    await sql.end();
  }
}

async function up(
  sql: postgres.Sql,
  url: string,
  sets: SetFiles[],
  count: number,
  options: MigrateOptions,
): Promise<string[]> {
  const installed = await installedExtensions(sql);
  const names: string[] = [];
  for (const set of sets) {
    await adoptSquashed(sql, set);
    await applyDefinitions(sql, set.early, { checkBodies: false });
    const afterEach = set.name === 'app' ? installed.flatMap((e) => e.afterEachMigration) : [];
    names.push(...(await runMigrations(url, set, 'up', count - names.length, afterEach)));
    if (await pending(sql, set)) return names; // --count stopped inside this set
    await applyDefinitions(sql, set.definitions);
    // What an extension defines may be needed by the app's migrations (afterEach).
    if (set.name === 'gateway' && sets.some((s) => s.name === 'app')) {
      await applyDefinitions(
        sql,
        installed.flatMap((e) => e.definitions),
      );
    }
  }
  if (sets.some((s) => s.name === 'app')) {
    await applyPolicyFiles(sql);
    await runEach(
      sql,
      installed.flatMap((e) => e.afterMigrate),
    );
  }
  await refuseUnisolated(sql, options.isolation);
  return names;
}

async function down(sql: postgres.Sql, url: string, sets: SetFiles[], count: number): Promise<string[]> {
  const names: string[] = [];
  for (const set of sets) {
    if (names.length >= count) break;
    const ran = await runMigrations(url, set, 'down', count - names.length, []);
    names.push(...ran);
    // The definitions may read what went down: the next up applies them all again (and the
    // extensions' with the app's).
    if (ran.length > 0) {
      await forgetDefinitions(sql, set.name + '/');
      if (set.name === 'app') await forgetDefinitions(sql, 'extensions/');
    }
  }
  return names;
}

/** The extensions of sql/extensions/ installed in this database. */
async function installedExtensions(sql: postgres.Sql): Promise<Extension[]> {
  const all = extensions();
  const present = new Set(
    (
      await sql<{ extname: string }[]>`SELECT extname FROM pg_extension WHERE extname = ANY (${all.map((e) => e.name)})`
    ).map((r) => r.extname),
  );
  return all.filter((e) => present.has(e.name));
}

/** Whether migrations of the set are still to run. */
async function pending(sql: postgres.Sql, set: SetFiles): Promise<boolean> {
  const files = (await readdir(set.migrations)).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, ''));
  const [exists] = await sql<{ present: boolean }[]>`
    SELECT to_regclass(${'tally_migrations.' + set.table}) IS NOT NULL AS present`;
  if (!exists?.present) return files.length > 0;
  const ran = new Set(
    (await sql<{ name: string }[]>`SELECT name FROM tally_migrations.${sql(set.table)}`).map((r) => r.name),
  );
  return files.some((f) => !ran.has(f));
}

async function runMigrations(
  databaseUrl: string,
  set: SetFiles,
  direction: 'up' | 'down',
  count: number,
  afterEach: string[],
): Promise<string[]> {
  if (count <= 0) return [];
  // Loaded here, not at start: with its own Postgres driver it is megabytes a server never uses.
  const { runner } = await import('node-pg-migrate');
  const tail = (await Promise.all(afterEach.map((f) => readFile(f, 'utf8')))).flatMap((t) => splitStatements(t));
  const ran = await runner({
    databaseUrl,
    dir: set.migrations,
    direction,
    count,
    migrationsTable: set.table,
    migrationsSchema: 'tally_migrations',
    createMigrationsSchema: true,
    checkOrder: true,
    singleTransaction: true,
    migrationLoaderStrategies: [{ extensions: ['.sql'], loader: sqlMigrations(tail) }],
    log: () => {},
  });
  return ran.map((m) => set.prefix + m.name);
}

type MigrationLoader = Extract<
  NonNullable<RunnerOption['migrationLoaderStrategies']>[number]['loader'],
  (paths: string[]) => unknown
>;

/**
 * node-pg-migrate's SQL files (`-- Up Migration` / `-- Down Migration`), one step per statement;
 * `tail`'s statements end each up (an extension's after-each-migration step).
 */
export const sqlMigrations =
  (tail: string[] = []): MigrationLoader =>
  async (filePaths) =>
    Promise.all(
      filePaths.map(async (filePath) => {
        const text = await readFile(filePath, 'utf8');
        const marker = (direction: string) => new RegExp(`^\\s*--[\\s-]*${direction}\\s+migration`, 'im');
        const upAt = text.search(marker('up'));
        const downAt = text.search(marker('down'));
        const upSql = upAt < 0 ? text : text.slice(upAt, downAt > upAt ? downAt : undefined);
        const downSql = downAt < 0 ? undefined : text.slice(downAt, upAt > downAt ? upAt : undefined);
        const steps = (statements: string[]) => (pgm: MigrationBuilder) => {
          for (const statement of statements) pgm.sql(statement);
        };
        return {
          id: filePath,
          filePaths: [filePath],
          actions: {
            up: steps([...splitStatements(upSql), ...tail]),
            down: downSql === undefined ? false : steps(splitStatements(downSql)),
          },
        };
      }),
    );

/** `tally policies apply`: every file of policies/, in one transaction, then the reload. */
export async function applyPolicies(databaseUrl: string): Promise<string[]> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const files = await applyPolicyFiles(sql);
    await schemaChanged(sql);
    return files;
  } finally {
    await sql.end();
  }
}

async function applyPolicyFiles(sql: postgres.Sql): Promise<string[]> {
  const files = (await readdir(policiesDir)).filter((f) => f.endsWith('.sql')).sort();
  await sql.begin(async (tx) => {
    for (const file of files) {
      for (const statement of splitStatements(await readFile(join(policiesDir, file), 'utf8'))) {
        await tx.unsafe(statement);
      }
    }
  });
  return files;
}
