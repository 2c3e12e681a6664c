import postgres, { type Sql } from 'postgres';
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

export async function openDatabase(config: Config, log?: (line: string) => void): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, stop: async () => {} };
  const db = await startEmbedded({ home: config.home, port: config.embeddedPort, log });
  return { url: db.url, embedded: true, stop: db.stop };
}

/** The JWT secret: configured, or generated once into the home folder in embedded mode. */
export async function jwtSecretFor(config: Config, db: Database): Promise<string> {
  if (config.jwtSecret) return config.jwtSecret;
  if (db.embedded) return (await localSecrets(config.home)).jwtSecret;
  throw new Error('TALLY_JWT_SECRET is required with DATABASE_URL (at least 32 characters)');
}

export const AUTHENTICATOR_ROLE = 'authenticator';

/**
 * The server's pool. Each connection takes the role `authenticator` at start-up, so even a
 * superuser DATABASE_URL serves requests with no privileges beyond the API roles it switches
 * to per transaction.
 *
 * `prepare: false` (TALLY_DB_PREPARED_STATEMENTS=false) turns off named prepared statements for
 * every query of the pool: postgres.js lets the pool's setting override a query's own, so a
 * transaction pooler (PgBouncer in transaction mode), which may hand each transaction another
 * server connection, never sees a statement name it does not know.
 */
export function serverPool(url: string, options: { max?: number; prepare?: boolean } = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    prepare: options.prepare ?? true,
    idle_timeout: 60,
    connect_timeout: 5,
    // While Postgres is away, a request waits for the next connection attempt before it fails
    // with a 503: postgres.js's default backoff grows to 20 s across the pool (requests hung
    // for 22 s and recovery took 11 s in tests/faults.test.ts). At most half a second between
    // attempts: quick 503s during an outage, and service again within a second of its end.
    backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    onnotice: () => {},
    connection: { role: AUTHENTICATOR_ROLE, application_name: 'tally' } as Record<string, string>,
  });
}

/** A short-lived owner connection for administration. */
export function adminClient(url: string): Sql {
  return postgres(url, { max: 2, onnotice: () => {}, connect_timeout: 5 });
}
