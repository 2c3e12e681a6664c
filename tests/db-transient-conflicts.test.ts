import postgres from 'postgres';
import request from 'supertest';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { waitFor } from './harness/wait.js';

// Postgres rolls back a transaction that deadlocked with another (40P01) or lost a serialization
// race (40001) although nothing in it was wrong: on a Citus cluster an insert did so against a
// shard move, and answered 500. Tally runs such a transaction again, whole, so the write is made
// once and answered as it would have been a moment later; a conflict that persists ends after a
// bounded number of runs, answered as PostgREST answers it.

let s: FinanceSuite;

beforeAll(async () => {
  s = await setUpFinance(restEnv());
  // An insert of A takes advisory lock 2, then 1 (a DBA's trigger, the test's way to order locks).
  await s.db.admin.unsafe(`
    CREATE FUNCTION public.lock_two_then_one() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_catalog.pg_advisory_xact_lock(2);
      PERFORM pg_catalog.pg_advisory_xact_lock(1);
      RETURN NEW;
    END $$;
    CREATE TRIGGER lock_two_then_one BEFORE INSERT ON public.personal_transactions
      FOR EACH ROW WHEN (NEW.name = 'deadlock witness') EXECUTE FUNCTION public.lock_two_then_one();
    CREATE SEQUENCE public.conflict_runs;
    GRANT USAGE ON SEQUENCE public.conflict_runs TO api_write;
    CREATE FUNCTION public.always_conflicts() RETURNS int LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_catalog.nextval('public.conflict_runs'); -- a sequence is not rolled back: it counts runs
      RAISE SQLSTATE '40001' USING MESSAGE = 'could not serialize access';
    END $$;
    GRANT EXECUTE ON FUNCTION public.always_conflicts() TO api_write;
    NOTIFY pgrst, 'reload schema';`);
}, 60_000);
afterAll(() => tearDown(s.db, s.t));

/** Sessions waiting for advisory lock `key` (its low 32 bits are objid). */
const waitingFor = async (key: number) =>
  (
    await s.db.admin<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_catalog.pg_locks
       WHERE locktype = 'advisory' AND objid = ${key} AND NOT granted`
  )[0]!.n;

test('an insert cancelled by a deadlock runs again and records its row once', async () => {
  const other = postgres(s.db.url, { max: 1, onnotice: () => {} });
  let answer: Promise<request.Response> | undefined;
  let answered = false;
  try {
    await other.begin(async (tx) => {
      // The other transaction never gives up first: the request's backend detects the cycle.
      await tx`SET LOCAL deadlock_timeout = '1h'`;
      await tx`SELECT pg_catalog.pg_advisory_xact_lock(1)`;
      answer = request(s.t.app)
        .post('/rest/v1/personal_transactions')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.jwtA}`, Prefer: 'return=representation' })
        .send({ name: 'deadlock witness', amount: 12.5, category_id: 'essentials', method_id: 'cash' })
        .then((r) => ((answered = true), r));
      await waitFor(async () => (await waitingFor(1)) === 1, 'the insert to hold lock 2 and wait for lock 1');
      // The cycle: Postgres cancels the insert's transaction (40P01), which lets go of lock 2.
      await tx`SELECT pg_catalog.pg_advisory_xact_lock(2)`;
      // Its second run waits for lock 2, held here until this transaction commits (or, not run
      // again, it has been answered).
      await waitFor(async () => answered || (await waitingFor(2)) === 1, 'the insert to run again');
    });
    const res = await answer!;
    expect(res.status).toBe(201);
    expect(res.body).toEqual([expect.objectContaining({ name: 'deadlock witness', amount: 12.5 })]);
    const rows = await s.db.admin`
      SELECT amount::float8 AS amount FROM personal_transactions
       WHERE workspace_id = ${s.a.id} AND name = 'deadlock witness'`;
    expect(rows).toEqual([{ amount: 12.5 }]);
  } finally {
    await other.end();
  }
});

test('a conflict that persists is answered after three runs, not retried forever', async () => {
  const res = await request(s.t.app)
    .post('/rest/v1/rpc/always_conflicts')
    .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${s.jwtA}` })
    .send({});
  expect(res.status).toBe(500);
  expect(res.body).toMatchObject({ code: '40001' });
  const [runs] = await s.db.admin<{ n: string }[]>`SELECT last_value::text AS n FROM public.conflict_runs`;
  expect(runs!.n).toBe('3');
});
