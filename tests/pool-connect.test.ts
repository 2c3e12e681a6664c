import { ApiError } from '../gateway/errors.js';
import { createPool, type Pool } from '../gateway/engine/pool.js';
import { databaseUrl } from './harness/db.js';
import { stallProxy, type StallProxy } from './harness/stall-proxy.js';

// Reserving a pool slot whose connection is still to be made is bounded by the acquisition
// deadline: a connection that hangs while it starts (a network that drops packets, a stalled
// postmaster) is a 504 PGRST003 at the deadline, not a wait without end, and the slot is
// replaced. An open connection is reserved without a timer; the deadline covers the rest.

describe('reserving a slot whose connection hangs while it is made', () => {
  let proxy: StallProxy;
  let pool: Pool;

  beforeAll(async () => {
    proxy = await stallProxy(databaseUrl('postgres'), 'tally-connect-test');
    pool = createPool(proxy.url, {
      size: 1,
      acquireTimeoutMs: 500,
      perKey: 1,
      client: { onnotice: () => {}, connection: { application_name: 'tally-connect-test' } as never },
    });
  });
  afterAll(async () => {
    proxy.resume();
    await pool.end({ timeout: 1 });
    await proxy.close();
  });

  test('fails at the deadline with 504 PGRST003, and the slot serves once the network answers', async () => {
    proxy.stall();
    const started = Date.now();
    const err = await pool.reserve('k').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 504, code: 'PGRST003' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(450); // it waited for the deadline, not less
    expect(pool.stats()).toMatchObject({ size: 1, free: 1, waiting: 0 });

    proxy.resume();
    const lease = await pool.reserve('k');
    const [row] = await lease.sql`SELECT 1 AS one`;
    lease.release();
    expect(row).toEqual({ one: 1 });

    // The open connection is reserved at once, time after time.
    for (let i = 0; i < 20; i++) {
      const again = await pool.reserve('k');
      again.release();
    }
    expect(pool.stats()).toMatchObject({ size: 1, free: 1, waiting: 0 });
  });
});
