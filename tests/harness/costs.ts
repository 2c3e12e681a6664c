import { startTestApp, type TestApp } from './app.js';
import { serverUrl, type TestDatabase } from './db.js';
import { first } from './present.js';
import { waitFor } from './wait.js';
import { wireProxy, type WireCounts, type WireProxy } from './wire.js';

// What a request costs the database, counted, never timed: on the wire between the server and
// Postgres (tests/harness/wire.ts: statements, round trips, commits, parses), and by
// pg_stat_statements the statements functions and triggers ran inside them (`nested`), in the
// test's own database alone. The change watch's connection is left out: its poll is a cost per
// second, not per request.

export const COST_FIELDS = ['statements', 'roundTrips', 'commits', 'parses', 'nested'] as const;

export type Cost = Pick<WireCounts, Exclude<(typeof COST_FIELDS)[number], 'nested'>> & { nested: number };

const notWatch = (name: string) => name !== 'tally-changes';

export interface CostMeter {
  /** Starts a server on the test database whose pool goes through the counting proxy. */
  app(env: Record<string, string>): TestApp;
  /** Runs `send` (one request) and answers what it cost, once nothing it sent waits for an answer. */
  measure<T>(send: () => Promise<T>): Promise<{ result: T; cost: Cost }>;
  close(): Promise<void>;
}

/**
 * A meter on `db`, which it makes track its statements (pg_stat_statements, which the
 * harness's Postgres loads; a Postgres without it fails here, saying so). Call before any server
 * connects to the database: the tracking applies to sessions that start after it.
 */
export async function costMeter(db: TestDatabase): Promise<CostMeter> {
  const { loaded } = first(
    await db.admin<{ loaded: boolean }[]>`
      SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ', ')) AS loaded`,
  );
  if (!loaded)
    throw new Error(
      'counting needs pg_stat_statements in shared_preload_libraries (the harness loads it in its own Postgres)',
    );
  // In a schema of its own, out of the API's sight.
  await db.admin.unsafe(`CREATE SCHEMA test_stats; CREATE EXTENSION pg_stat_statements SCHEMA test_stats`);
  await db.admin.unsafe(`ALTER DATABASE ${db.name} SET pg_stat_statements.track = 'all'`);
  const proxy: WireProxy = await wireProxy(serverUrl(db.url));
  const apps: TestApp[] = [];

  /**
   * Statements run inside others in this database so far (toplevel false), but those of the
   * change watch's function, whose poll is counted apart. Nothing else may run in the database
   * while a request is measured: a test makes its data before.
   */
  async function nestedSoFar(): Promise<number> {
    const row = first(
      await db.admin<{ n: string }[]>`
        SELECT coalesce(sum(s.calls), 0)::text AS n FROM test_stats.pg_stat_statements s
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND NOT s.toplevel AND s.query NOT LIKE '%watched_relations%'
           AND s.query NOT LIKE '%schema_version_row%' AND s.query NOT LIKE 'SELECT md5(coalesce(string_agg(t::text,%'`,
    );
    return Number(row.n);
  }

  const snapshot = async (): Promise<Cost> => ({ ...proxy.total(notWatch), nested: await nestedSoFar() });

  return {
    app(env) {
      const t = startTestApp(db.url, env, proxy.url);
      apps.push(t);
      return t;
    },
    async measure(send) {
      await waitFor(() => proxy.idle(), 'no statement in flight before the request');
      const before = await snapshot();
      const result = await send();
      await waitFor(() => proxy.idle(), "the request's statements answered");
      const after = await snapshot();
      const cost = Object.fromEntries(COST_FIELDS.map((f) => [f, after[f] - before[f]])) as Cost;
      return { result, cost };
    },
    async close() {
      for (const t of apps) await t.close();
      await proxy.close();
    },
  };
}
