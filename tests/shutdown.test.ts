import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exited, tallyServer } from './harness/cli.js';
import { freePort, listenPort } from '../gateway/db/free-port.js';
import { waitFor } from './harness/wait.js';
import { present } from './harness/present.js';

// Shutdown: SIGTERM under a write load stops accepting, drains what is in flight,
// closes the pool and the embedded Postgres, and exits 0; after a restart every write that was
// acknowledged with 201 is there.

const READY = /Demo token\s+(tally_ws_\S+)/;

describe('tally up on SIGTERM', () => {
  let dir: string;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tally-shutdown-'));
    await chmod(dir, 0o755);
    env = {
      DATABASE_URL: undefined,
      TALLY_JWT_SECRET: undefined,
      TALLY_HOME: join(dir, 'home'),
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(await listenPort()),
      TALLY_RATE_LIMIT_PER_MINUTE: '100000',
    };
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('drains in-flight writes, exits 0 and loses no acknowledged write', async () => {
    const first = await tallyServer(['up'], env, READY);
    const base = /Tally is up on (\S+)/.exec(first.output)![1];
    const token = READY.exec(first.output)![1];
    const key = present(/Publishable key\s+(\S+)/.exec(first.output)?.[1], 'the publishable key');
    const exchange = await fetch(`${base}/api/v1/token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(exchange.status).toBe(200);
    const jwt = ((await exchange.json()) as { access_token: string }).access_token;
    const headers = {
      apikey: key,
      authorization: `Bearer ${jwt}`,
      'content-type': 'application/json',
      prefer: 'return=minimal',
    };

    let acknowledged = 0;
    let refused = 0; // no answer: the server had stopped accepting (connection refused or closed)
    let other = 0;
    let stop = false;
    const writer = async (): Promise<void> => {
      // Until the server is gone (bounded, in case it never goes).
      for (let i = 0; i < 20_000 && !stop; i++) {
        try {
          const res = await fetch(`${base}/rest/v1/personal_transactions`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ name: 'shutdown-probe', amount: 1, category_id: 'essentials', method_id: 'cash' }),
            signal: AbortSignal.timeout(10_000),
          });
          await res.arrayBuffer();
          if (res.status === 201) acknowledged++;
          else other++;
        } catch {
          refused++;
          if (first.child.exitCode !== null) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const writers = Array.from({ length: 6 }, writer);
    // The signal comes once writes are being acknowledged, however long that takes here.
    await waitFor(() => acknowledged >= 12, 'the first acknowledged writes');
    const beforeSignal = acknowledged;
    first.child.kill('SIGTERM');
    const code = await exited(first.child);
    stop = true;
    await Promise.all(writers);

    expect(code).toBe(0);
    expect(beforeSignal).toBeGreaterThan(0);
    expect(other).toBe(0); // nothing was answered with an error while draining
    expect(first.output).not.toMatch(/unexpected error|uncaught/i);

    // Restarted on the same home: the acknowledged writes are all there. A write whose
    // connection was cut before its answer (refused > 0) may or may not have committed, so
    // the count is exact when there was none.
    const second = await tallyServer(['up'], env, READY);
    try {
      const url = /Tally is up on (\S+)/.exec(second.output)![1];
      const res = await fetch(`${url}/rest/v1/personal_transactions?select=id&name=eq.shutdown-probe&limit=1`, {
        headers: { ...headers, prefer: 'count=exact' },
      });
      expect(res.status).toBe(206); // one row of the many, with the exact total
      const rows = Number(res.headers.get('content-range')!.split('/')[1]);
      expect(rows).toBeGreaterThanOrEqual(acknowledged);
      expect(rows).toBeLessThanOrEqual(acknowledged + refused);
      if (refused === 0) expect(rows).toBe(acknowledged);
      process.stdout.write(
        `shutdown: ${acknowledged} acknowledged (${beforeSignal} before SIGTERM), ${refused} refused, ${rows} rows\n`,
      );
    } finally {
      second.child.kill('SIGTERM');
      expect(await exited(second.child)).toBe(0);
    }
  }, 300_000);
});
