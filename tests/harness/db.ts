import postgres, { type Sql, type TransactionSql } from 'postgres';
import { randomBytes } from 'node:crypto';
import { migrate } from '../../gateway/db/migrate.js';
import { claimsStatement } from '../../gateway/engine/execute.js';

// Per-file databases cloned from the migrated template, and helpers to act as a request would:
// inside a transaction, as an API role, with the JWT claims of a workspace.
//
// Another way to make a database can be handed in (useDatabases): the scale suite's `on-citus`
// project makes each file's database on a Citus cluster, as a deployment is made, then migrated
// by `tally migrate`'s own code (tests/scale/harness/on-citus.ts).

export interface TestDatabase {
  name: string;
  /** Owner URL of this file's database. */
  url: string;
  /** An owner connection (superuser: bypasses RLS, for arranging and checking state). */
  admin: Sql;
  drop(): Promise<void>;
}

function clusterUrl(): string {
  const url = process.env.TALLY_TEST_CLUSTER_URL;
  if (!url) throw new Error('the test harness did not start Postgres (jest globalSetup)');
  return url;
}

export function databaseUrl(database: string): string {
  const u = new URL(clusterUrl());
  u.pathname = '/' + database;
  return u.toString();
}

/** The server's own login (authenticator) to a test database, as `tally serve` logs in. */
export function serverUrl(ownerUrl: string): string {
  const password = process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD;
  if (!password) throw new Error('the test harness did not set the authenticator password (jest globalSetup)');
  const u = new URL(ownerUrl);
  u.username = 'authenticator';
  u.password = encodeURIComponent(password);
  return u.toString();
}

/**
 * Whether this run's databases are on a Citus coordinator. Citus refuses changing a row's
 * distribution column (workspace_id) itself, with 0A000, before row-level security would with
 * 42501: the row stays where it was either way.
 */
export const onCitus = Boolean(process.env.TALLY_TEST_CITUS_WORKERS);

/** How a database is made and dropped when it is not a clone of the template. */
export interface Databases {
  /** Makes database `name`; returns its owner URL. */
  create(name: string): Promise<string>;
  drop(name: string): Promise<void>;
}

let databases: Databases | undefined;

/** Makes this file's databases with `made` (a project's setup file calls it). */
export function useDatabases(made: Databases): void {
  databases = made;
}

/** A new database: a clone of the migrated template, or empty with `{ empty: true }`. */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = 'tally_test_' + randomBytes(6).toString('hex');
  const made = databases;
  if (made) {
    const url = await made.create(name);
    if (!options.empty) await migrate(url);
    const admin = postgres(url, { max: 4, onnotice: () => {} });
    return {
      name,
      url,
      admin,
      async drop() {
        await admin.end({ timeout: 5 });
        await made.drop(name);
      },
    };
  }
  const cluster = postgres(clusterUrl(), { max: 1, onnotice: () => {} });
  try {
    // CREATE DATABASE … TEMPLATE fails while another session is connected to the template;
    // files start in parallel, so retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await cluster.unsafe(
          options.empty
            ? `CREATE DATABASE ${name}`
            : `CREATE DATABASE ${name} TEMPLATE ${process.env.TALLY_TEST_TEMPLATE}`,
        );
        break;
      } catch (err) {
        if (attempt > 50 || (err as { code?: string }).code !== '55006') throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await cluster.end();
  }
  const url = databaseUrl(name);
  const admin = postgres(url, { max: 4, onnotice: () => {} });
  return {
    name,
    url,
    admin,
    async drop() {
      await admin.end({ timeout: 5 });
      const c = postgres(clusterUrl(), { max: 1, onnotice: () => {} });
      try {
        await c.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface Claims {
  workspace_id?: string;
  role?: string;
  [key: string]: unknown;
}

/**
 * Runs `fn` the way the gateway runs a request: one transaction, the given API role, the
 * given JWT claims. The transaction is rolled back unless `commit` is set.
 */
export async function asRole<T>(
  sql: Sql,
  role: string,
  claims: Claims | null,
  fn: (tx: TransactionSql) => Promise<T>,
  options: { commit?: boolean } = {},
): Promise<T> {
  const rollback = new Error('rollback');
  let result: T | undefined;
  try {
    await sql.begin(async (tx) => {
      // As the gateway sets them (engine/execute.ts): the claims with SET LOCAL, which Citus
      // copies to the workers' connections of the transaction (the owner has no role setting
      // that asks for it, so it is asked here; a harmless placeholder on plain Postgres).
      await tx`SET LOCAL citus.propagate_set_commands = 'local'`;
      const json = claims ? JSON.stringify({ role, ...claims }) : '';
      await tx.unsafe(claimsStatement(json).text);
      await tx`SELECT set_config('role', ${role}, true)`;
      result = await fn(tx);
      if (!options.commit) throw rollback;
    });
  } catch (err) {
    if (err !== rollback) throw err;
  }
  return result as T;
}

/** The SQLSTATE a promise rejects with (fails the test if it resolves). */
export async function sqlState(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
  throw new Error('expected the statement to fail, but it succeeded');
}
