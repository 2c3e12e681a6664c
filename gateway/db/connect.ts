import postgres, { type Sql } from 'postgres';
import { createPool, type Pool } from '../engine/pool.js';
import type { Config } from '../config.js';
import { startEmbedded, localSecrets } from './embedded.js';

// Where the database is: DATABASE_URL, or the embedded Postgres in the Tally home folder.

export interface Database {
  /** The owner's URL: migrations, policies, the CLI's administration. */
  url: string;
  embedded: boolean;
  /** Stops the embedded server if this process started it. */
  stop(): Promise<void>;
}

/** `create`: make the embedded database when the home folder has none (`tally up` only). */
export async function openDatabase(
  config: Config,
  options: { create?: boolean; log?: (line: string) => void } = {},
): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, stop: async () => {} };
  const db = await startEmbedded({ home: config.home, port: config.embeddedPort, ...options });
  return { url: db.url, embedded: true, stop: db.stop };
}

/** The JWT secret: configured, or generated once into the home folder in embedded mode. */
export async function jwtSecretFor(config: Config, db: Database): Promise<string> {
  if (config.jwtSecret) return config.jwtSecret;
  if (db.embedded) return (await localSecrets(config.home)).jwtSecret;
  throw new Error('TALLY_JWT_SECRET is required with DATABASE_URL (at least 32 characters)');
}

const AUTHENTICATOR_ROLE = 'authenticator';

/**
 * The URL the server logs in with: TALLY_DB_URI, or in embedded mode the owner's address with
 * the login `authenticator` and its password from the home folder. The owner's credentials
 * are for migrations and the command line only.
 */
export async function serverLoginUrl(config: Config, db: Database): Promise<string> {
  if (config.dbUri) return config.dbUri;
  if (!db.embedded) {
    throw new Error(
      'TALLY_DB_URI is required with DATABASE_URL: the server logs in as authenticator, not as the owner (see the README)',
    );
  }
  const url = new URL(db.url);
  url.username = AUTHENTICATOR_ROLE;
  url.password = encodeURIComponent((await localSecrets(config.home)).authenticatorPassword);
  return url.toString();
}

/**
 * Gives the server's login the password it will log in with (`tally migrate`, `tally up`), so
 * that nobody types an ALTER ROLE. A TALLY_DB_URI naming another user is left to its DBA.
 */
export async function provisionServerLogin(config: Config, db: Database): Promise<void> {
  if (!config.dbUri && !db.embedded) return;
  const url = new URL(await serverLoginUrl(config, db));
  if (decodeURIComponent(url.username) !== AUTHENTICATOR_ROLE || url.password === '') return;
  const admin = adminClient(db.url);
  try {
    // Only once the migration that makes the function has run (migrate --count can stop before).
    const [ready] =
      await admin`SELECT 1 FROM pg_proc WHERE oid = to_regprocedure('tally.set_login_password(text, text)')`;
    if (ready) await admin`SELECT tally.set_login_password(${AUTHENTICATOR_ROLE}, ${decodeURIComponent(url.password)})`;
  } finally {
    await admin.end();
  }
}

/**
 * The server's pool (pool.ts), logged in as the server's own login (authenticator: NOINHERIT,
 * no privileges of its own; each request's transaction switches to one API role).
 *
 * `prepare: false` (TALLY_DB_PREPARED_STATEMENTS=false) turns off named prepared statements for
 * every query of the pool: postgres.js lets the pool's setting override a query's own, so a
 * transaction pooler (PgBouncer in transaction mode), which may hand each transaction another
 * server connection, never sees a statement name it does not know.
 */
export function serverPool(
  url: string,
  options: { max?: number; acquireTimeoutMs?: number; perTenant?: number; reserved?: number; prepare?: boolean } = {},
): Pool {
  return createPool(url, {
    size: options.max ?? 10,
    acquireTimeoutMs: options.acquireTimeoutMs ?? 3000,
    perKey: options.perTenant ?? Math.max(1, Math.floor((options.max ?? 10) / 2)),
    reserved: options.reserved,
    client: {
      prepare: options.prepare ?? true,
      idle_timeout: 60,
      connect_timeout: 5,
      // While Postgres is away, a request waits for the next connection attempt before it fails
      // with a 503: postgres.js's default backoff grows to 20 s (requests hung for 22 s and
      // recovery took 11 s in tests/faults.test.ts). At most half a second between attempts:
      // quick 503s during an outage, and service again within a second of its end.
      backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
      onnotice: () => {},
      connection: { application_name: 'tally' },
    } as never,
  });
}

/** The pool sized and bounded by the configuration. */
export function configuredPool(url: string, config: Config): Pool {
  return serverPool(url, {
    max: config.poolSize,
    acquireTimeoutMs: config.poolAcquireTimeoutMs,
    perTenant: config.poolPerTenant,
    reserved: config.poolReserved,
    prepare: config.preparedStatements,
  });
}

/** A short-lived owner connection for administration. */
export function adminClient(url: string): Sql {
  return postgres(url, { max: 2, onnotice: () => {}, connect_timeout: 5 });
}
