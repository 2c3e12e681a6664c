import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { first } from './harness/present.js';

// A fund's figures have one definition (the computed field summary(funds)); every way of asking
// for them (funds?select=summary, balance, rpc/fund_summaries, rpc/fund_summary) must agree
// with a plain GROUP BY over many funds, and see only the caller's workspace. (How fast a long
// list is belongs to the benchmark, not here.)

interface Figures {
  fund_id: string;
  balance: number;
  income: number;
  expenses: number;
  progress: number | null;
  participant_count: number;
}

describe('fund figures over many funds', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, jwtA: string;
  let expected: Map<string, Figures>;

  beforeAll(async () => {
    ({ db, t, a, b, jwtA } = await setUpFinance(restEnv()));
    for (const ws of [a, b]) {
      await db.admin`
        INSERT INTO public.contacts (workspace_id, name) SELECT ${ws.id}, 'bulk contact ' || i FROM generate_series(1, 3) i`;
      await db.admin`
        INSERT INTO public.funds (workspace_id, name, target_amount)
        SELECT ${ws.id}, 'bulk ' || i, CASE WHEN i % 4 = 0 THEN NULL WHEN i % 9 = 0 THEN 0 ELSE i * 20 END
          FROM generate_series(1, 300) i`;
      // Per fund i: an income of i·10 and i·0.25, an expense of (i mod 7)·1.5 when not zero, and
      // i mod 3 participants. B's figures are ten times larger, so a leak would show.
      const scale = ws === a ? 1 : 10;
      await db.admin`
        INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
        SELECT f.workspace_id, f.id, x.name, x.amount * ${scale}, x.category, 'cash'
          FROM public.funds f, LATERAL (SELECT split_part(f.name, ' ', 2)::int AS i) n,
               LATERAL (VALUES ('in', n.i * 10.0, 'fund-income'), ('in', n.i * 0.25, 'fund-income'),
                               ('out', -(n.i % 7) * 1.5, 'hotel')) x(name, amount, category)
         WHERE f.workspace_id = ${ws.id} AND f.name LIKE 'bulk %' AND x.amount <> 0`;
      await db.admin`
        INSERT INTO public.fund_participants (workspace_id, fund_id, contact_id)
        SELECT f.workspace_id, f.id, c.id
          FROM public.funds f, LATERAL (SELECT split_part(f.name, ' ', 2)::int AS i) n,
               LATERAL (SELECT id FROM public.contacts c WHERE c.workspace_id = f.workspace_id AND c.name LIKE 'bulk contact %'
                         ORDER BY c.name LIMIT n.i % 3) c
         WHERE f.workspace_id = ${ws.id} AND f.name LIKE 'bulk %'`;
    }
    // The figures of A's funds by a plain aggregate, as the owner.
    const rows = await db.admin<
      { fund_id: string; income: string; expenses: string; target: string | null; participants: number }[]
    >`
      SELECT f.id AS fund_id,
             coalesce((SELECT sum(amount) FROM public.fund_transactions x WHERE x.workspace_id = f.workspace_id AND x.fund_id = f.id AND amount > 0), 0) AS income,
             coalesce((SELECT -sum(amount) FROM public.fund_transactions x WHERE x.workspace_id = f.workspace_id AND x.fund_id = f.id AND amount < 0), 0) AS expenses,
             f.target_amount AS target,
             (SELECT count(*)::int FROM public.fund_participants p WHERE p.workspace_id = f.workspace_id AND p.fund_id = f.id) AS participants
        FROM public.funds f WHERE f.workspace_id = ${a.id}`;
    expected = new Map(
      rows.map((r) => {
        const balance = Number(r.income) - Number(r.expenses);
        const target = r.target === null ? 0 : Number(r.target);
        return [
          r.fund_id,
          {
            fund_id: r.fund_id,
            balance,
            income: Number(r.income),
            expenses: Number(r.expenses),
            progress: target > 0 ? Math.round((balance / target) * 10_000) / 10_000 : null,
            participant_count: r.participants,
          },
        ];
      }),
    );
    expect(expected.size).toBe(301); // the fixture's fund and 300 more
  });
  afterAll(() => tearDown(db, t));

  const get = (path: string) =>
    request(t.app)
      .get(`/rest/v1/${path}`)
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });

  it('funds?select=id,balance,summary answers every fund of the workspace with its own figures', async () => {
    const res = await get('funds?select=id,balance,summary').expect(200);
    expect(res.body).toHaveLength(expected.size);
    for (const row of res.body as { id: string; balance: number; summary: Figures }[]) {
      expect(row.summary).toEqual(expected.get(row.id));
      expect(row.balance).toBe(row.summary.balance); // the balance is the summary's
    }
  });

  it('rpc/fund_summaries and rpc/fund_summary agree with it, and hold nothing of the other workspace', async () => {
    const all = await get('rpc/fund_summaries').expect(200);
    expect(new Map((all.body as Figures[]).map((f) => [f.fund_id, f]))).toEqual(expected);
    const some = [...expected.keys()].slice(0, 20);
    for (const id of some) {
      expect((await get(`rpc/fund_summary?fund_id=${id}`).expect(200)).body).toEqual(expected.get(id));
    }
    const bFund = first(
      await db.admin<{ id: string }[]>`SELECT id FROM public.funds WHERE workspace_id = ${b.id} AND name = 'bulk 1'`,
    );
    expect((await get(`rpc/fund_summary?fund_id=${bFund.id}`).expect(200)).body.balance).toBeNull();
  });
});
