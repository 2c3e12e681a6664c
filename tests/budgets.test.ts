import request from 'supertest';
import { onCitus, type TestDatabase } from './harness/db.js';
import { accessToken, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { waitFor } from './harness/wait.js';
import { toolCaller } from './harness/mcp-tools.js';
import { first } from './harness/present.js';
import { keepActivity } from '../gateway/activity.js';

// The budgets of a workspace, reached: its activity log (TALLY_ACTIVITY_BUDGET_BYTES) and its
// idempotency keys' stored answers (TALLY_IDEMPOTENCY_BUDGET_BYTES, and the largest answer one key
// keeps, TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES). What the database holds is counted exactly as it is
// written; a write past a budget is refused in its own transaction, nothing of it written; the
// log is pruned to half its budget, oldest whole requests first and never a change of the last
// 24 hours; an undo has room past the budget; a key is never dropped before its 24 hours; and
// one workspace at its budget leaves the others' writes as they were.

const BUDGET = 40_000;
const KEYS_BUDGET = 8192;
const MAX_ANSWER = 2048;

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string, jwtB: string;
let tokenA: string;
/** A workspace of its own for the keys, so that their budget is reached alone. */
let k: { id: string; jwt: string };

beforeAll(async () => {
  ({ db, t, a, jwtA, jwtB, tokenA } = await setUpFinance(
    restEnv({
      TALLY_ACTIVITY_BUDGET_BYTES: String(BUDGET),
      TALLY_IDEMPOTENCY_BUDGET_BYTES: String(KEYS_BUDGET),
      TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES: String(MAX_ANSWER),
    }),
    ['Budget A', 'Budget B'],
  ));
  const ws = await workspaceWithData(db.admin, 'Budget K');
  const token = await tokenFor(db.admin, ws.id, 'write');
  k = { id: ws.id, jwt: await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id }) };
});
afterAll(() => tearDown(db, t));

const rest = (method: 'post' | 'patch', path: string, jwt = jwtA) => {
  const agent = request(t.app);
  return agent[method](`/rest/v1/${path}`).set({
    apikey: TEST_API_KEY,
    Authorization: `Bearer ${jwt}`,
    Prefer: 'return=representation',
  });
};

const expenses = (n: number, name: string) =>
  Array.from({ length: n }, (_, i) => ({
    name: `${name} ${i}`,
    amount: 1 + i,
    category_id: 'other',
    method_id: 'cash',
  }));

/** What the database counts of a workspace, and what its entries and keys really take. */
async function usage(ws: string) {
  const [row] = await db.admin<
    { counted: string; logged: string; keys: string; stored: string; pruned: string | null }[]
  >`
    SELECT coalesce((SELECT sum(activity_bytes) FROM tally.workspace_usage WHERE workspace_id = ${ws}), 0)::text AS counted,
           (SELECT coalesce(sum(bytes), 0) FROM public.activity WHERE workspace_id = ${ws})::text AS logged,
           coalesce((SELECT sum(key_bytes) FROM tally.workspace_usage WHERE workspace_id = ${ws}), 0)::text AS keys,
           (SELECT coalesce(sum(bytes), 0) FROM tally.idempotency_keys WHERE workspace_id = ${ws})::text AS stored,
           (SELECT activity_pruned_until::text FROM tally.workspace_usage WHERE workspace_id = ${ws} AND slot = 0) AS pruned`;
  return {
    counted: Number(row!.counted),
    logged: Number(row!.logged),
    keys: Number(row!.keys),
    stored: Number(row!.stored),
    pruned: row!.pruned,
  };
}

const countOf = async (ws: string, table = 'personal_transactions') =>
  Number((await db.admin.unsafe(`SELECT count(*) AS n FROM public.${table} WHERE workspace_id = $1`, [ws]))[0]!.n);

/** The activity of a workspace: how many entries each request has. */
async function requestsOf(ws: string): Promise<Map<string, number>> {
  const rows = await db.admin<{ request_id: string; n: number }[]>`
    SELECT request_id::text, count(*)::int AS n FROM public.activity WHERE workspace_id = ${ws} GROUP BY request_id`;
  return new Map(rows.map((r) => [r.request_id, r.n]));
}

describe("a workspace's activity log within its budget", () => {
  let undoOffered: string;
  let uncounted: number;

  it('counts every request exactly, and refuses the write that would take the log past its budget: nothing written', async () => {
    // The fixture's records were written by SQL in the database: logged, not counted.
    uncounted = (await usage(a.id)).logged;
    // A fund whose delete takes its transactions with it: one request of several entries.
    const fund = (await rest('post', 'funds').send({ name: 'Pruned whole' }).expect(201)).body[0].id as string;
    await rest('post', 'fund_transactions')
      .send(
        ['one', 'two', 'three'].map((name) => ({
          fund_id: fund,
          name,
          amount: 5,
          category_id: 'other',
          method_id: 'cash',
        })),
      )
      .expect(201);
    await request(t.app)
      .delete(`/rest/v1/funds?id=eq.${fund}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` })
      .expect(204);

    // Batches of 20, then one by one: the log as full as a write can make it.
    let refused: request.Response | undefined;
    let written = 0;
    for (const size of [20, 1]) {
      refused = undefined;
      for (let i = 0; i < 100 && !refused; i++) {
        const res = await rest('post', 'personal_transactions').send(expenses(size, `Batch ${size}.${i}`));
        if (res.status === 429) refused = res;
        else {
          expect(res.status).toBe(201);
          if (size === 20) undoOffered = res.headers['tally-request-id'] as string;
          written += size;
        }
        const u = await usage(a.id);
        expect(u.counted).toBe(u.logged - uncounted);
      }
    }
    expect(refused?.body).toMatchObject({
      code: 'PT429',
      message: expect.stringMatching(/^The activity log of this workspace is full: .* its budget is 40000$/),
    });
    // Every change is of the last 24 hours: room comes when the oldest of them may be pruned.
    const retry = Number(refused!.headers['retry-after']);
    expect(retry).toBeGreaterThan(86_000);
    expect(retry).toBeLessThanOrEqual(86_460);
    expect((await usage(a.id)).counted).toBeLessThanOrEqual(BUDGET);
    // The fixture's expense and the batches written; of the refused one, nothing.
    expect(await countOf(a.id)).toBe(1 + written);
  });

  it("works out a refusal's Retry-After from the oldest entries only, never the whole day's log", async () => {
    // Each refusal summed every entry of the last 24 hours: 130-160 ms of Postgres a refused
    // write at 64 MiB of log, which a token could send 600 times a minute. Counted here by the
    // entries the refusal reads (Postgres's statistics of this transaction), of a log of 20,000.
    const ws = await workspaceWithData(db.admin, 'a full day');
    await db.admin`
      INSERT INTO public.activity (workspace_id, table_name, record_id, action, after, actor, surface, request_id, bytes, at)
      SELECT ${ws.id}, 'personal_transactions', g::text, 'insert', '{}', 'token', 'rest', gen_random_uuid(), 400,
             now() - make_interval(secs => 20000 - g)
        FROM generate_series(0, 19999) g`;
    await db.admin`ANALYZE public.activity`;
    const refusal = async (over: number) => {
      // The log holds its budget of 8,000,000 bytes and `over` more with this write of 400.
      await db.admin`DELETE FROM tally.workspace_usage WHERE workspace_id = ${ws.id}`;
      await db.admin`
        INSERT INTO tally.workspace_usage (workspace_id, slot, activity_bytes, key_bytes)
        VALUES (${ws.id}, 0, ${8_000_000 + over - 400}, 0)`;
      return db.admin.begin(async (tx) => {
        const read = async () =>
          Number(
            first(
              await tx<{ n: string }[]>`
              SELECT (pg_catalog.pg_stat_get_xact_tuples_returned('public.activity'::regclass)
                      + pg_catalog.pg_stat_get_xact_tuples_fetched('public.activity'::regclass))::text AS n`,
            ).n,
          );
        const before = await read();
        const failed = await tx
          .savepoint(
            (sp) => sp`
            SELECT tally.count_activity(${ws.id}, gen_random_uuid(), 400, false, 8000000)`,
          )
          .then(
            () => undefined,
            (err: { message: string; detail?: string }) => err,
          );
        return { entries: (await read()) - before, retry: Number(JSON.parse(failed!.detail!).headers['Retry-After']) };
      });
    };
    // 4,000 bytes to go: the ten oldest entries, the newest of them made 19,991 s before.
    // (On Citus the entries are read on a worker: this transaction's statistics count none there.)
    const near = await refusal(4000);
    if (!onCitus) expect(near.entries).toBeLessThan(50);
    expect(near.retry).toBeGreaterThanOrEqual(60 + 86_400 - 19_991 - 5);
    expect(near.retry).toBeLessThanOrEqual(60 + 86_400 - 19_991 + 5);
    // More than 1,000 entries to go: at most those are read, and the answer is the longest wait.
    const far = await refusal(2_000_000);
    if (!onCitus) expect(far.entries).toBeLessThanOrEqual(1100);
    expect(far.retry).toBe(60 + 86_400);
  });

  it('refuses on every surface, and the other workspaces write as before', async () => {
    const api = await request(t.app)
      .post('/api/v1/personal_transactions')
      .set({ Authorization: `Bearer ${jwtA}` })
      .send(expenses(1, 'Through the wrapper')[0]!);
    expect([api.status, api.body.code, Number(api.headers['retry-after']) > 0]).toEqual([429, 'PT429', true]);
    const call = toolCaller(
      () => t.app,
      () => tokenA,
    );
    const tool = await call('create_expense', expenses(1, 'Through MCP')[0]!);
    expect(tool.isError).toBe(true);
    expect(tool.content[0]!.text).toMatch(
      /^The activity log of this workspace is full: .*\. Retry after \d+ seconds\.$/,
    );
    expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE name LIKE 'Through %'`).toHaveLength(0);

    await rest('post', 'personal_transactions', jwtB).send(expenses(20, 'B goes on')).expect(201);
  });

  it('refuses one request whose changes alone take more than a quarter of the budget (413), even with room', async () => {
    const res = await rest('post', 'personal_transactions', jwtB).send(expenses(40, 'Too many at once'));
    expect([res.status, res.body.code]).toEqual([413, 'PT413']);
    expect(res.body.hint).toBe('Change fewer records at once');
    expect(
      await db.admin`SELECT 1 FROM public.personal_transactions WHERE name LIKE 'Too many at once %'`,
    ).toHaveLength(0);
  });

  it('lets an undo through past the budget, up to twice it: what the log holds can be undone', async () => {
    const before = await usage(a.id);
    const undone = await rest('post', 'rpc/undo_changes').send({ request_id: undoOffered }).expect(200);
    expect(undone.body).toHaveLength(20);
    const after = await usage(a.id);
    expect(after.counted).toBe(after.logged - uncounted);
    expect(after.counted).toBeGreaterThan(BUDGET);
    expect(after.counted).toBeLessThanOrEqual(2 * BUDGET);
    expect(after.counted).toBeGreaterThan(before.counted);
    // An ordinary write is still refused.
    await rest('post', 'personal_transactions').send(expenses(1, 'Still full')).expect(429);
  });

  it('never prunes a change of the last 24 hours; past them, prunes the oldest whole requests back to half the budget', async () => {
    const whole = await requestsOf(a.id);
    const [{ id: prunedChange } = { id: '' }] = await db.admin<{ id: string }[]>`
      SELECT id FROM public.activity WHERE workspace_id = ${a.id} ORDER BY at, id LIMIT 1`;
    expect((await usage(a.id)).counted).toBeGreaterThan(BUDGET);
    // The sweep, as the server runs it every minute: everything is of the last day, nothing goes.
    expect(await db.admin`SELECT tally.prune_activity_budget(${a.id}, ${BUDGET})::int AS n`).toEqual([{ n: 0 }]);
    expect(await requestsOf(a.id)).toEqual(whole);

    // A day later (the log's entries made older), the sweep makes room.
    // (In UTC, where the arithmetic is immutable: Citus takes no stable function of a column in an UPDATE.)
    await db.admin`UPDATE public.activity SET at = ((at AT TIME ZONE 'UTC') - interval '25 hours') AT TIME ZONE 'UTC'
                    WHERE workspace_id = ${a.id}`;
    const newest = (
      await db.admin<{ at: string }[]>`SELECT max(at)::text AS at FROM public.activity WHERE workspace_id = ${a.id}`
    )[0]!.at;
    const again = keepActivity(t.ctx.db, t.ctx.config);
    try {
      await waitFor(async () => (await usage(a.id)).counted <= BUDGET / 2, 'the log to be pruned to half its budget');
    } finally {
      again();
    }
    const after = await usage(a.id);
    // Counted anew from the log when it was pruned: what SQL in the database made counts now too.
    expect(after.counted).toBe(after.logged);
    expect(after.counted).toBeGreaterThan(BUDGET / 4);
    expect(after.pruned).not.toBeNull();
    // Whole requests: each that is left has every entry it had; the newest ones are left.
    const left = await requestsOf(a.id);
    for (const [id, n] of left) expect([id, n]).toEqual([id, whole.get(id)]);
    const oldestLeft = (
      await db.admin<{ at: string }[]>`SELECT min(at)::text AS at FROM public.activity WHERE workspace_id = ${a.id}`
    )[0]!.at;
    expect(new Date(oldestLeft).getTime()).toBeGreaterThan(new Date(after.pruned!).getTime());
    expect(new Date(oldestLeft).getTime()).toBeLessThanOrEqual(new Date(newest).getTime());

    // An undo of a pruned change says where the log starts; writes go on.
    const missing = await rest('post', 'rpc/undo_changes')
      .send({ activity_ids: [prunedChange] })
      .expect(404);
    expect(missing.body.details).toMatch(
      /^The log keeps the changes after .*: older ones were pruned to keep it within its budget$/,
    );
    await rest('post', 'personal_transactions').send(expenses(5, 'Room again')).expect(201);
  });
});

describe("a workspace's idempotency keys within their budget", () => {
  let n = 0;
  const keyed = (body: unknown, key = `budget-key-${++n}`, query = '') =>
    rest('post', `personal_transactions${query}`, k.jwt)
      .set('Idempotency-Key', key)
      .send(body as object);
  const keyRows = async (key: string) =>
    (await db.admin`SELECT 1 FROM tally.idempotency_keys WHERE workspace_id = ${k.id} AND key = ${key}`).length;

  it('refuses a keyed write whose answer is larger than a key keeps (400 TLY022): nothing written, no key kept', async () => {
    const note = 'n'.repeat(1900);
    const res = await keyed({ ...expenses(1, 'Large answer')[0], note }, 'large-answer');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: 'TLY022',
      message: expect.stringMatching(
        /^The answer of this request is too large to keep for its Idempotency-Key: \d+ bytes$/,
      ),
      details: `A key keeps an answer of at most ${MAX_ANSWER} bytes for its retries; nothing was written`,
    });
    expect(await keyRows('large-answer')).toBe(0);
    expect(await db.admin`SELECT 1 FROM public.personal_transactions WHERE name = 'Large answer 0'`).toHaveLength(0);
    // The same create asking for a small answer is kept.
    const small = await keyed({ ...expenses(1, 'Large answer')[0], note }, 'large-answer', '?select=id');
    expect(small.status).toBe(201);
    const [stored] = await db.admin<{ bytes: number }[]>`
      SELECT bytes FROM tally.idempotency_keys WHERE workspace_id = ${k.id} AND key = 'large-answer'`;
    expect(stored!.bytes).toBeLessThan(MAX_ANSWER);
  });

  it('counts each key exactly, refuses the keyed write past the budget (429, Retry-After: when the oldest key expires), and replays as before', async () => {
    let refused: request.Response | undefined;
    const kept: string[] = [];
    for (let i = 0; i < 100 && !refused; i++) {
      const key = `fill-${i}`;
      const res = await keyed(expenses(1, `Keyed ${i}`)[0], key);
      if (res.status === 429) refused = res;
      else {
        expect(res.status).toBe(201);
        kept.push(key);
      }
      const u = await usage(k.id);
      expect(u.keys).toBe(u.stored);
    }
    expect(refused?.body).toMatchObject({
      code: 'PT429',
      message: expect.stringMatching(/^The idempotency keys of this workspace are full: .* its budget is 8192$/),
    });
    const retry = Number(refused!.headers['retry-after']);
    expect(retry).toBeGreaterThan(86_000);
    expect(retry).toBeLessThanOrEqual(86_400);
    expect((await usage(k.id)).stored).toBeLessThanOrEqual(KEYS_BUDGET);
    const refusedKey = `fill-${kept.length}`;
    expect(await keyRows(refusedKey)).toBe(0);
    expect(
      await db.admin`SELECT 1 FROM public.personal_transactions WHERE name = ${`Keyed ${kept.length} 0`}`,
    ).toHaveLength(0);

    // A retry of a kept key answers what it answered, writing nothing; a create without a key is written.
    const replay = await keyed(expenses(1, 'Keyed 0')[0], 'fill-0');
    expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([201, 'true']);
    await rest('post', 'personal_transactions', k.jwt).send(expenses(1, 'Unkeyed')).expect(201);
  });

  it('never drops a key early; once the oldest expire, keyed writes go on, before and after the sweep deletes them', async () => {
    await db.admin`UPDATE tally.idempotency_keys SET created_at = now() - interval '25 hours'
                    WHERE workspace_id = ${k.id} AND key IN ('fill-0', 'fill-1', 'fill-2')`;
    // Past the count, but within the keys of the last 24 hours: written.
    await keyed(expenses(1, 'After expiry')[0], 'after-expiry').expect(201);
    const stop = keepActivity(t.ctx.db, t.ctx.config);
    try {
      await waitFor(async () => (await keyRows('fill-0')) === 0, 'the expired keys to be swept');
    } finally {
      stop();
    }
    const u = await usage(k.id);
    expect(u.keys).toBe(u.stored);
    expect(await keyRows('fill-3')).toBe(1);
  });
});

describe("a workspace's counts", () => {
  it("never make one write of a workspace wait for another's commit", async () => {
    // A write counts its bytes at its end and commits right after. With one row of counts per
    // workspace, each write held that row until its commit, and the next write of the
    // workspace waited: its writes went one commit at a time. Here a transaction holds every
    // slot the workspace has (as writes in flight, or the budget's sweep, do) while B writes.
    const b = (await db.admin<{ id: string }[]>`SELECT id FROM public.workspaces WHERE name = 'Budget B'`)[0]!.id;
    expect((await rest('post', 'personal_transactions', jwtB).send(expenses(1, 'First of B')[0]!)).status).toBe(201);
    const before = await usage(b);
    const holder = await db.admin.reserve();
    try {
      await holder`BEGIN`;
      const held = await holder`SELECT slot FROM tally.workspace_usage WHERE workspace_id = ${b} FOR UPDATE`;
      expect(held.length).toBeGreaterThan(0);
      const write = await rest('post', 'personal_transactions', jwtB).send(expenses(1, 'While held')[0]!);
      expect(write.status).toBe(201);
      await holder`COMMIT`;
    } finally {
      holder.release();
    }
    // Counted in a slot of its own: the count grew by what the log took (the fixture's own rows,
    // made in SQL, were never counted).
    const after = await usage(b);
    expect(after.counted - before.counted).toBe(after.logged - before.logged);
    expect(after.logged).toBeGreaterThan(before.logged);
    const slots = await db.admin`SELECT slot FROM tally.workspace_usage WHERE workspace_id = ${b}`;
    expect(slots.length).toBeGreaterThan(1);
  });
});
