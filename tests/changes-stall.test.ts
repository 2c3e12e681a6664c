import { CHANGE_BOUND_MS } from '../gateway/engine/changes.js';
import { changesOf, schemaCacheOf } from '../gateway/engine/run.js';
import type { Lease } from '../gateway/engine/pool.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { restEnv } from './harness/rest.js';
import { waitFor } from './harness/wait.js';
import { holdEverySlot } from './harness/pool.js';

// The change watch (gateway/engine/changes.ts) while every connection of the server hangs: the
// pool's slots busy with statements on backends that stopped, the control connection stopped
// in the middle of nothing, and the watch's own connection stopped too. Behind PgBouncer a new
// table once went unseen for minutes in one of three processes: the watch polled on a
// connection shared with schema loads, and a poll that stalled held every later one behind it.

describe('the change watch while every connection of the server is stuck', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = startTestApp(db.url, restEnv());
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /** The backends of this file's server: pool slots ('tally'), control, the change watch. */
  const serverBackends = async () =>
    (
      await db.admin<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE 'tally%' AND pid <> pg_backend_pid()`
    ).map((r) => r.pid);

  it('sees a new category within the bound, giving up on a poll that stalled', async () => {
    const watch = changesOf(t.ctx);
    await watch.ready();
    await schemaCacheOf(t.ctx).get(); // the control connection exists and has loaded
    let seen = 0;
    const stopWatching = watch.onChange(() => {
      seen++;
    });

    // Every pool slot held by a statement in flight on a backend that is about to stop.
    const size = t.ctx.db.stats().size;
    const leases: Lease[] = await holdEverySlot(t.ctx.db, t.ctx.config.poolReserved);
    await Promise.all(leases.map((lease) => lease.sql`SELECT 1`));
    const stopped = await serverBackends();
    expect(stopped.length).toBeGreaterThanOrEqual(size + 2); // the slots, control, the watch
    for (const pid of stopped) process.kill(pid, 'SIGSTOP');
    const inFlight = leases.map((lease) => lease.sql`SELECT 1`.then(() => lease.release()));
    try {
      await db.admin`INSERT INTO public.categories (id, name, for_expenses) VALUES ('stall-garden', 'Garden', true)`;
      const start = Date.now();
      await waitFor(() => seen > 0, 'the change watch to see the new category', CHANGE_BOUND_MS);
      expect(Date.now() - start).toBeLessThanOrEqual(CHANGE_BOUND_MS);
    } finally {
      for (const pid of stopped) process.kill(pid, 'SIGCONT');
      stopWatching();
    }
    await Promise.all(inFlight);
    expect(t.ctx.db.stats()).toMatchObject({ size, free: size });
  }, 60_000);
});
