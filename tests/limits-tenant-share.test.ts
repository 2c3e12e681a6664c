import postgres from 'postgres';
import request from 'supertest';
import { addMember } from '../gateway/admin/members.js';
import { accessToken } from './harness/app.js';
import { tokenFor } from './harness/fixtures.js';
import { present } from './harness/present.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { waitFor } from './harness/wait.js';

// A workspace cannot take the pool from the others by spreading its heaviest reads over several
// tokens: the pool's share is per workspace (TALLY_DB_TENANT_CLAIM), and a part of the pool
// (TALLY_DB_POOL_RESERVED) is kept for the owner's controls: the token exchange, the settings
// page and /readyz. Two read tokens of workspace A each send five reads that run until the test
// ends them; while they run, workspace B's read, B's token exchange, B's settings page and
// /readyz must each answer 200, that is within the acquisition deadline (3 s), where they
// answered 504 PGRST003 when the share was per token.
//
// The reads last because they wait for a lock the test holds, not because they are slow: a
// regular-expression read that cost seconds of CPU here finished within the deadline on a
// quieter machine, and a read waiting beyond the share then took its slot and answered 200.

const PASSWORD = 'correct horse battery staple';
/** A read that waits for the lock the test holds (holdLock): it runs until the lock is let go or it is cancelled. */
const WORST = '/rest/v1/rpc/wait_for_release';
const LOCK_KEY = 4242;
const POOL = 10;
const STATEMENT_TIMEOUT_MS = 60_000; // the attack lasts until the test cancels it

let s: FinanceSuite;
let secondReadA: string;
let tokenB: string;

beforeAll(async () => {
  s = await setUpFinance(
    restEnv({
      TALLY_DB_POOL: String(POOL),
      TALLY_DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '3000',
      TALLY_SIGN_IN_FAILURES_PER_ADDRESS: '1000',
    }),
  );
  await s.db.admin.unsafe(`
    CREATE FUNCTION public.wait_for_release() RETURNS int LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_catalog.pg_advisory_xact_lock_shared(${LOCK_KEY});
      RETURN 1;
    END $$;
    GRANT EXECUTE ON FUNCTION public.wait_for_release() TO api_read;`);
  const read = await tokenFor(s.db.admin, s.a.id, 'read');
  secondReadA = await accessToken({ role: 'api_read', workspace_id: s.a.id, scope: 'read', sub: read.id });
  tokenB = (await tokenFor(s.db.admin, s.b.id, 'write')).token;
  await addMember(s.db.admin, s.b.id, 'owner@b.example', 'owner', PASSWORD, 'test');
}, 60_000);
afterAll(() => tearDown(s.db, s.t));

/** Takes the lock the attack's reads wait for, on a connection of its own, until the returned let-go is called. */
async function holdLock(): Promise<() => Promise<void>> {
  const owner = postgres(s.db.url, { max: 1, onnotice: () => {} });
  await owner`SELECT pg_catalog.pg_advisory_lock(${LOCK_KEY})`;
  return () => owner.end();
}

/** Cancels the attack's statements (they would run until the statement timeout). */
const cancelAttack = () => s.db.admin`
  SELECT pg_catalog.pg_cancel_backend(pid) FROM pg_catalog.pg_stat_activity
   WHERE datname = pg_catalog.current_database() AND application_name = 'tally' AND state = 'active'
     AND pid <> pg_catalog.pg_backend_pid()`;

test("two tokens of one workspace running the worst reads leave other workspaces' reads, exchange and settings served", async () => {
  const agent = request.agent(s.t.app);
  const login = await agent.get('/settings/login').expect(200);
  const csrf = present(/name="csrf" value="([^"]+)"/.exec(login.text)?.[1], 'a csrf field');
  await agent
    .post('/settings/login')
    .type('form')
    .send({ csrf, email: 'owner@b.example', password: PASSWORD })
    .expect(303);

  const letGo = await holdLock();
  const per = s.t.ctx.config.poolPerTenant;
  const attackers = [s.readA, secondReadA];
  const finished: number[] = [];
  const attack = attackers.flatMap((jwt) =>
    Array.from({ length: 5 }, () =>
      request(s.t.app)
        .get(WORST)
        .set('apikey', TEST_API_KEY)
        .set('authorization', `Bearer ${jwt}`)
        .then((r) => void finished.push(r.status)),
    ),
  );
  try {
    // The attack holds at least its share of the pool.
    await waitFor(() => {
      const { size, free } = s.t.ctx.db.stats();
      return size - free >= per;
    }, 'the attack to hold its share of the pool');

    const timed = async (name: string, send: () => Promise<request.Response>) => {
      const started = performance.now();
      const res = await send();
      return { name, status: res.status, code: (res.body as { code?: string }).code, ms: performance.now() - started };
    };
    const victims = await Promise.all([
      timed('read of B', () =>
        request(s.t.app)
          .get('/rest/v1/contacts?select=id,name&limit=5')
          .set('apikey', TEST_API_KEY)
          .set('authorization', `Bearer ${s.jwtB}`),
      ),
      timed('token exchange of B', () =>
        request(s.t.app).post('/functions/v1/api-token').set('authorization', `Bearer ${tokenB}`),
      ),
      timed('settings page of B', () => agent.get(`/settings/api?workspace=${s.b.id}`)),
      timed('readyz', () => request(s.t.app).get('/readyz')),
    ]);
    // The attack's running reads were still running when the victims were answered.
    const running = attack.length - finished.length;
    console.log(
      `victims while two tokens of one workspace ran ${attack.length} worst reads: ${victims
        .map((v) => `${v.name} ${v.status} in ${v.ms.toFixed(0)} ms`)
        .join(', ')}`,
    );
    expect(victims.map((v) => `${v.name}: ${v.status} ${v.code ?? ''}`.trim())).toEqual([
      'read of B: 200',
      'token exchange of B: 200',
      'settings page of B: 200',
      'readyz: 200',
    ]);
    expect(running).toBeGreaterThanOrEqual(per);
    // Beyond the workspace's share (both tokens together), its requests waited behind its own
    // and were told to slow down.
    await waitFor(() => finished.length >= attack.length - per, "the waits beyond the workspace's share to end");
    expect(finished).toEqual(Array.from({ length: attack.length - per }, () => 429));
  } finally {
    await waitFor(async () => {
      await cancelAttack();
      return finished.length === attack.length;
    }, 'the attack to end');
    await letGo();
  }
}, 120_000);
