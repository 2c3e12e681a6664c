import postgres, { type Sql } from 'postgres';
import { createPool, type Pool } from '../engine/pool.js';
import { log } from '../log.js';
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
  const db = await startEmbedded({
    home: config.home,
    port: config.embeddedPort,
    homeGiven: config.given.has('TALLY_HOME'),
    ...options,
  });
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
      'TALLY_DB_URI is required with DATABASE_URL: the server logs in as authenticator, not as the owner (see docs/deployment.md)',
    );
  }
  const url = new URL(db.url);
  url.username = AUTHENTICATOR_ROLE;
  url.password = encodeURIComponent((await localSecrets(config.home)).authenticatorPassword);
  return url.toString();
}

/** `tally migrate` would change the password of a login another deployment on the cluster logs in with. */
class SharedLoginError extends Error {}

/**
 * Gives the server's login the password it will log in with (`tally migrate`, `tally up`), so
 * that nobody types an ALTER ROLE. A TALLY_DB_URI naming another user is left to its DBA.
 * The login is the cluster's, not the database's: deployments of several databases on one
 * cluster share it, and its comment lists the databases whose deployments log in with its
 * password (sql/gateway/definitions/login.sql). A password that logs in already is left as it
 * is, this database joining the list; another is set only while no other database's deployment
 * is listed: the change would lock that deployment's servers out (every new connection refused,
 * its requests answered 503), so the run stops instead, saying what they must share.
 */
export async function provisionServerLogin(config: Config, db: Database): Promise<void> {
  if (!config.dbUri && !db.embedded) return;
  const url = new URL(await serverLoginUrl(config, db));
  if (decodeURIComponent(url.username) !== AUTHENTICATOR_ROLE || url.password === '') return;
  const password = decodeURIComponent(url.password);
  const admin = adminClient(db.url);
  try {
    // Only once the migration that makes the functions has run (migrate --count can stop before).
    const [state] = await admin<{ ready: boolean; listed: boolean }[]>`
      SELECT to_regprocedure('tally.set_login_password(text, text)') IS NOT NULL AS ready,
             to_regprocedure('tally.share_login_password(text)') IS NOT NULL AS listed`;
    if (!state?.ready) return;
    // Definitions older than the list (an embedded start of an older home): set, as they did.
    if (!state.listed) return void (await admin`SELECT tally.set_login_password(${AUTHENTICATOR_ROLE}, ${password})`);
    const refused = await loginRefusal(url.toString());
    if (refused === undefined) return void (await admin`SELECT tally.share_login_password(${AUTHENTICATOR_ROLE})`);
    const others = await otherDeployments(admin);
    if (others.length > 0) throw sharedLoginError(others, refused);
    await admin`SELECT tally.set_login_password(${AUTHENTICATOR_ROLE}, ${password})`;
  } finally {
    await admin.end();
  }
}

/** The other databases of the cluster whose deployments log in with the login's password. */
async function otherDeployments(admin: Sql): Promise<string[]> {
  const rows = await admin<{ name: string }[]>`
    SELECT name FROM unnest(tally.login_databases(${AUTHENTICATOR_ROLE})) AS name WHERE name <> current_database()`;
  return rows.map((r) => r.name);
}

function sharedLoginError(others: string[], refused: Error): SharedLoginError {
  return new SharedLoginError(
    `not changing the password of ${AUTHENTICATOR_ROLE}: the login is shared by every database of this cluster, ` +
      `and the deployments of these databases log in with the password it has, which TALLY_DB_URI's is not: ` +
      `${others.join(', ')} (TALLY_DB_URI: ${refused.message}). Give this deployment that same password (TALLY_DB_URI), or, to change it for all of them, ` +
      `run ALTER ROLE ${AUTHENTICATOR_ROLE} PASSWORD '…' as the owner and update every deployment's TALLY_DB_URI`,
  );
}

/** Why `url` does not log in (a refused login, no server there), or undefined when it does. */
async function loginRefusal(url: string): Promise<Error | undefined> {
  const sql = postgres(url, {
    max: 1,
    connect_timeout: 5,
    target_session_attrs: targetSessionAttrs(url),
    onnotice: () => {},
  } as never);
  try {
    await sql`SELECT 1`;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  } finally {
    await sql.end({ timeout: 1 });
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
      target_session_attrs: targetSessionAttrs(url),
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

/**
 * The target_session_attrs to give postgres.js for a URL. postgres.js (3.4.9) checks
 * `read-write` by default_transaction_read_only alone, which a hot standby does not set: it
 * took a standby for writable. Tally asks it for `primary` (not in recovery) instead; a primary
 * set read-only is then answered 503 TLY003, and /readyz says so.
 */
function targetSessionAttrs(url: string): string | undefined {
  const query = url.includes('?') ? url.slice(url.indexOf('?') + 1) : '';
  const asked = new URLSearchParams(query).get('target_session_attrs') ?? process.env.PGTARGETSESSIONATTRS;
  return asked === 'read-write' ? 'primary' : undefined;
}

/**
 * Whether the server's login reaches Postgres through a connection pooler: the backend that
 * answers is not the one the connection announced when it was made (BackendKeyData), as with
 * PgBouncer, which hands each transaction a server connection of its own. Named prepared
 * statements then fail on another connection than the one that prepared them.
 */
async function throughPooler(url: string): Promise<boolean> {
  const sql = postgres(url, {
    max: 1,
    prepare: false,
    connect_timeout: 5,
    target_session_attrs: targetSessionAttrs(url),
    onnotice: () => {},
    connection: { application_name: 'tally' },
  } as never);
  try {
    const rows = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    return rows.state.pid !== rows[0]?.pid;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * Whether the server may use named prepared statements: as configured, but never through a
 * pooler that would break them (a valid token answered 401, 500s, stalls): they are switched
 * off at start, and the log says so.
 */
export async function preparedStatementsFor(url: string, wanted: boolean): Promise<boolean> {
  if (!wanted || !(await throughPooler(url))) return wanted;
  log.warn(
    'the database connection goes through a pooler (PgBouncer in transaction mode?): prepared statements are off; set TALLY_DB_PREPARED_STATEMENTS=false to say so',
  );
  return false;
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
