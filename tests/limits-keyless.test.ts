import postgres from 'postgres';
import request from 'supertest';
import { newPublishableKey } from '../gateway/secrets.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { holdEverySlot } from './harness/pool.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { waitFor } from './harness/wait.js';

// Work the server does before it knows who is asking (an apikey lookup, the rate-limit counter,
// the token exchange's lookup, /readyz) is bounded like a workspace's. A freed pool slot went
// to a keyless waiter before any workspace and keyless statements could fill every slot: 32
// keep-alive connections from one address with no valid credential took another workspace's
// reads from a p99 of 40-100 ms to 14-24 s, 5-16 % of them 504. Now the server's statements for
// an address count against that address's share of the pool, a wrong apikey is remembered, an
// address known to be over its limit is refused without a database call, and /readyz asks the
// database at most once a second.
//
// Lookups stay in flight because they wait for a lock the test holds on the keys' table, not
// because they are slow.

const FLOODER = '203.0.113.9';
const POOL = 10;

let s: FinanceSuite;

beforeAll(async () => {
  s = await setUpFinance(
    restEnv({
      TALLY_DB_POOL: String(POOL),
      TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '3000',
      TALLY_TRUST_PROXY: 'true', // the flood comes from an address of its own (X-Forwarded-For)
    }),
  );
}, 60_000);
afterAll(() => tearDown(s.db, s.t));

/** Locks the publishable keys' table until the returned let-go: every apikey lookup waits for it. */
async function lockKeys(): Promise<() => Promise<void>> {
  const owner = postgres(s.db.url, { max: 1, onnotice: () => {} });
  const held = await owner.reserve();
  await held`BEGIN`;
  await held`LOCK TABLE public.publishable_keys IN ACCESS EXCLUSIVE MODE`;
  return async () => {
    await held`ROLLBACK`;
    held.release();
    await owner.end();
  };
}

/** The server's backends waiting for that lock: its lookups in flight. */
const lookupsInFlight = async (): Promise<number> =>
  (
    await s.db.admin<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity
     WHERE datname = pg_catalog.current_database() AND application_name = 'tally' AND wait_event_type = 'Lock'`
  )[0]!.n;

const readOfB = () =>
  request(s.t.app)
    .get('/rest/v1/contacts?select=id&limit=1')
    .set({ apikey: TEST_API_KEY, authorization: `Bearer ${s.jwtB}`, 'X-Forwarded-For': '198.51.100.20' });

test("a flood of unknown apikeys from one address holds its share of the pool, and another workspace's read is served", async () => {
  // The server is up and has read the schema (which the lock would hold up too).
  expect((await readOfB()).status).toBe(200);
  const letGo = await lockKeys();
  const per = s.t.ctx.config.poolPerTenant;
  const flood: Promise<number>[] = [];
  try {
    for (let i = 0; i < 3 * POOL; i++)
      flood.push(
        request(s.t.app)
          .get('/rest/v1/contacts?select=id')
          .set({ apikey: newPublishableKey(), 'X-Forwarded-For': FLOODER })
          .then((r) => r.status),
      );
    await waitFor(async () => (await lookupsInFlight()) >= per, "the flood's lookups to hold the address's share");
    const read = await readOfB();
    expect([read.status, read.body]).toEqual([200, [{ id: expect.any(String) }]]);
    // The flood never held more than its share (it held every slot, and the read waited until 504).
    expect(await lookupsInFlight()).toBe(per);
  } finally {
    await letGo();
  }
  // Each lookup in the end: the key is unknown (401), or it waited past the deadline behind the
  // address's own lookups (429), or the address went over its limit.
  const statuses = await Promise.all(flood);
  expect(statuses.filter((x) => x !== 401 && x !== 429)).toEqual([]);
}, 60_000);

describe('an address over its limit', () => {
  let t: TestApp;
  const LIMIT = 3;
  beforeAll(() => {
    t = startTestApp(s.db.url, restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: String(LIMIT), TALLY_TRUST_PROXY: 'true' }));
  });
  afterAll(() => t.close());
  const hits = async (address: string) =>
    (await s.db.admin<{ hits: number }[]>`SELECT hits FROM tally.rate_limits WHERE key = ${`req:ip:${address}`}`)[0]
      ?.hits;

  test('is refused without counting it again: the counter stops one past the limit', async () => {
    const from = '192.0.2.31';
    const anon = () =>
      request(t.app).get('/rest/v1/contacts?select=id').set({ apikey: TEST_API_KEY, 'X-Forwarded-For': from });
    for (let i = 0; i < LIMIT; i++) expect((await anon()).status).toBe(401);
    for (let i = 0; i < 20; i++) expect((await anon()).status).toBe(429);
    // Counted 24 times before: every refused request ran the counter.
    expect(await hits(from)).toBe(LIMIT + 1);
  });

  test('is refused before any unknown apikey it sends is looked up', async () => {
    const from = '192.0.2.32';
    const unknown = () =>
      request(t.app).get('/rest/v1/contacts?select=id').set({ apikey: newPublishableKey(), 'X-Forwarded-For': from });
    for (let i = 0; i < LIMIT; i++) expect((await unknown()).status).toBe(401);
    expect((await unknown()).status).toBe(429);
    // A lookup now would wait for the lock until its deadline (503): every answer is the 429.
    const letGo = await lockKeys();
    try {
      const statuses = await Promise.all(Array.from({ length: 10 }, () => unknown().then((r) => r.status)));
      expect(statuses).toEqual(statuses.map(() => 429));
    } finally {
      await letGo();
    }
    expect(await hits(from)).toBe(LIMIT + 1);
  });
});

test('/readyz asks the database once for many requests: one probe waits for the pool, not one per request', async () => {
  const leases = await holdEverySlot(s.t.ctx.db, s.t.ctx.config.poolReserved);
  let most = 0;
  let answered = false;
  const watching = (async () => {
    while (!answered) {
      most = Math.max(most, s.t.ctx.db.stats().waiting);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try {
    const statuses = await Promise.all(
      Array.from({ length: 50 }, () =>
        request(s.t.app)
          .get('/readyz')
          .then((r) => r.status),
      ),
    );
    // No slot for the probe: not ready, and one probe waited for the pool (50 before).
    expect(statuses).toEqual(statuses.map(() => 503));
    expect(most).toBe(1);
  } finally {
    answered = true;
    await watching;
    for (const lease of leases) lease.release();
  }
  await waitFor(async () => (await request(s.t.app).get('/readyz')).status === 200, '/readyz to be ready again');
});
