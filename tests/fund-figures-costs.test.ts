import request from 'supertest';
import { accessToken, type TestApp } from './harness/app.js';
import { COST_FIELDS, costMeter, type Cost, type CostMeter } from './harness/costs.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { toolCaller } from './harness/mcp-tools.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';

// The figures of a list of funds (balance, income, expenses, progress, participants) cost the
// same whatever the number of funds: a workspace of 2,000 funds costs what one of 2 does, in
// statements sent, round trips, commits, and statements run inside functions (counted,
// tests/harness/costs.ts; how fast belongs to the benchmark), through rpc/fund_summaries and
// MCP list_funds. The computed fields summary and balance are one statement too, but a
// function of one row: Postgres runs its two statements (transactions, participants) for each
// fund it answers, and this test holds them to exactly that, so that a third is noticed.

const FUNDS = { few: 2, many: 2000 };

describe('the figures of many funds cost what those of two do', () => {
  let db: TestDatabase;
  let meter: CostMeter;
  let t: TestApp;
  const callers = {} as Record<keyof typeof FUNDS, { jwt: string; token: string }>;

  beforeAll(async () => {
    db = await createTestDatabase();
    meter = await costMeter(db);
    for (const [size, funds] of Object.entries(FUNDS) as [keyof typeof FUNDS, number][]) {
      const ws = await workspaceWithData(db.admin, `figures ${size}`);
      // funds - 1 more funds (the fixture made one), each with an income, an expense and a participant.
      await db.admin`
        INSERT INTO public.funds (workspace_id, name, target_amount)
        SELECT ${ws.id}, 'fund ' || i, 100 FROM generate_series(2, ${funds}) i`;
      await db.admin`
        INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
        SELECT f.workspace_id, f.id, x.name, x.amount, x.category, 'cash'
          FROM public.funds f, (VALUES ('in', 30, 'fund-income'), ('out', -10, 'hotel')) x(name, amount, category)
         WHERE f.workspace_id = ${ws.id} AND f.name LIKE 'fund %'`;
      await db.admin`
        INSERT INTO public.fund_participants (workspace_id, fund_id, contact_id)
        SELECT f.workspace_id, f.id, ${ws.contactId} FROM public.funds f WHERE f.workspace_id = ${ws.id} AND f.name LIKE 'fund %'`;
      const token = await tokenFor(db.admin, ws.id, 'write');
      callers[size] = {
        jwt: await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id }),
        token: token.token,
      };
    }
    await db.admin`ANALYZE`;
    t = meter.app(restEnv({ TALLY_DB_POOL: '2' }));
  });
  afterAll(async () => {
    await meter.close();
    await db.drop();
  });

  const rest = (size: keyof typeof FUNDS, path: string) => () =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, authorization: `Bearer ${callers[size].jwt}` })
      .expect(200)
      .then((res) => expect((res.body as unknown[]).length).toBe(FUNDS[size]));
  const mcp = (size: keyof typeof FUNDS) => async () => {
    const result = await toolCaller(
      () => t.app,
      () => callers[size].token,
    )('list_funds', {});
    expect((result.structuredContent.funds as unknown[]).length).toBe(FUNDS[size]);
  };

  /** Each kind, and the statements its functions run per fund answered (beyond those at 2 funds). */
  const KINDS: Record<string, { send: (size: keyof typeof FUNDS) => () => Promise<unknown>; perFund: number }> = {
    'GET /rest/v1/rpc/fund_summaries': { send: (size) => rest(size, 'rpc/fund_summaries'), perFund: 0 },
    'MCP tools/call list_funds': { send: mcp, perFund: 0 },
    'GET /rest/v1/funds?select=*,summary': { send: (size) => rest(size, 'funds?select=*,summary'), perFund: 2 },
    'GET /rest/v1/funds?select=id,balance': { send: (size) => rest(size, 'funds?select=id,balance'), perFund: 2 },
  };

  /** The least cost of three sends (the first of a statement on a connection parses it). */
  async function costOf(send: () => Promise<unknown>): Promise<Cost> {
    const costs: Cost[] = [];
    for (let i = 0; i < 3; i++) costs.push((await meter.measure(send)).cost);
    return Object.fromEntries(COST_FIELDS.map((f) => [f, Math.min(...costs.map((c) => c[f]))])) as Cost;
  }

  it.each(Object.keys(KINDS))('%s', async (kind) => {
    const { send, perFund } = KINDS[kind]!;
    const few = await costOf(send('few'));
    const many = await costOf(send('many'));
    const expected = { ...few, nested: few.nested + perFund * (FUNDS.many - FUNDS.few) };
    expect({ kind, funds: FUNDS.many, ...many }).toEqual({ kind, funds: FUNDS.many, ...expected });
  });
});
