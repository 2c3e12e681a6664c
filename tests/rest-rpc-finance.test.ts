import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';

// fund_summary and friends (sql/app/definitions/funds.sql) over /rest/v1/rpc on the finance schema:
// the figures, their composition with the read grammar, and RLS through SECURITY INVOKER
// functions: workspace A's claims never see B's figures. The wrapper shows the same numbers.

describe('/rest/v1/rpc/fund_summary (finance schema)', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string, readA: string, jwtB: string;
  let emptyFund: string;

  beforeAll(async () => {
    ({ db, t, a, b, jwtA, readA, jwtB } = await setUpFinance(restEnv()));
    // A's fund: +100 (fixture), +50, -30.5 → balance 119.5 of target 1000; one participant.
    await db.admin`
      INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id) VALUES
        (${a.id}, ${a.fundId}, 'More', 50, 'fund-income', 'cash'),
        (${a.id}, ${a.fundId}, 'Hotel', -30.5, 'hotel', 'credit-card'),
        (${b.id}, ${b.fundId}, 'B only', 5000, 'fund-income', 'cash')`;
    ({ id: emptyFund } = first(
      await db.admin<{ id: string }[]>`
      INSERT INTO public.funds (workspace_id, name) VALUES (${a.id}, 'no target') RETURNING id`,
    ));
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string, jwt = jwtA, headers: Record<string, string> = {}) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, ...headers });
  const post = (path: string, body: unknown, jwt = jwtA) =>
    request(t.app)
      .post(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` })
      .send(body as object);

  const figuresA = { balance: 119.5, income: 150, expenses: 30.5, progress: 0.1195, participant_count: 1 };

  it("answers one fund's figures as an object, over POST with named arguments and over GET", async () => {
    const p = await post('rpc/fund_summary', { fund_id: a.fundId });
    expect(p.status).toBe(200);
    expect(p.body).toEqual({ fund_id: a.fundId, ...figuresA });
    const g = await get(`rpc/fund_summary?fund_id=${a.fundId}&select=balance,progress`);
    expect(g.body).toEqual({ balance: 119.5, progress: 0.1195 });
    const none = await get(`rpc/fund_summary?fund_id=${emptyFund}`);
    expect(none.body).toEqual({
      fund_id: emptyFund,
      balance: 0,
      income: 0,
      expenses: 0,
      progress: null,
      participant_count: 0,
    });
  });

  it('is callable with a read-scope token (EXECUTE granted to api_read)', async () => {
    const res = await get(`rpc/fund_summary?fund_id=${a.fundId}`, readA);
    expect(res.status).toBe(200);
    expect(res.body.balance).toBe(119.5);
  });

  it("obeys RLS as SECURITY INVOKER: B's claims see nothing of A's fund, A never sees B's", async () => {
    const cross = await get(`rpc/fund_summary?fund_id=${a.fundId}`, jwtB);
    expect(cross.status).toBe(200);
    expect(cross.body).toEqual({
      fund_id: null,
      balance: null,
      income: null,
      expenses: null,
      progress: null,
      participant_count: null,
    });
    const all = await get('rpc/fund_summaries?order=balance.desc', jwtA);
    expect(all.body.map((r: { fund_id: string }) => r.fund_id)).toEqual([a.fundId, emptyFund]);
    expect(JSON.stringify(all.body)).not.toContain(b.fundId);
    const allB = await get('rpc/fund_summaries', jwtB);
    expect(allB.body).toEqual([
      { fund_id: b.fundId, balance: 5100, income: 5100, expenses: 0, progress: 5.1, participant_count: 1 },
    ]);
  });

  it('composes fund_summaries() with filters, order, counts and singular responses', async () => {
    const res = await get('rpc/fund_summaries?select=fund_id,balance&balance=gt.0', jwtA, { Prefer: 'count=exact' });
    expect(res.headers['content-range']).toBe('0-0/1');
    expect(res.body).toEqual([{ fund_id: a.fundId, balance: 119.5 }]);
    const one = await get(`rpc/fund_summaries?fund_id=eq.${emptyFund}&select=progress`, jwtA, {
      Accept: 'application/vnd.pgrst.object+json',
    });
    expect(one.body).toEqual({ progress: null });
  });

  it('embeds the same figures in any read of funds through the computed field summary', async () => {
    const res = await get(`funds?select=name,summary&id=eq.${a.fundId}`);
    expect(res.body).toEqual([{ name: 'alpha fund', summary: { fund_id: a.fundId, ...figuresA } }]);
  });

  it("gives the wrapper's GET /api/v1/funds/{id} the same figures", async () => {
    const res = await request(t.app)
      .get(`/api/v1/funds/${a.fundId}`)
      .set({ Authorization: `Bearer ${jwtA}` });
    expect(res.status).toBe(200);
    expect(res.body.balance).toBe(119.5);
    expect(res.body.summary).toEqual(figuresA);
  });
});
