import request from 'supertest';
import { decodeJwt } from 'jose';
import { serverPool } from '../gateway/db/connect.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { asRole, createTestDatabase, serverUrl, sqlState, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { first } from './harness/present.js';

// Scopes: a read token's JWT maps to api_read, and the database itself refuses
// its writes; surfaces say the token is read-only.

describe('scopes', () => {
  let db: TestDatabase;
  let t: TestApp;
  let ws: WorkspaceFixture;

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    t = startTestApp(db.url, restEnv());
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const exchanged = async (scope: 'read' | 'write') => {
    const { token } = await tokenFor(db.admin, ws.id, scope);
    return (await request(t.app).post('/api/v1/token').send({ token }).expect(200)).body.access_token as string;
  };

  it('the database refuses every write of api_read on every finance table, and allows its reads', async () => {
    const claims = { workspace_id: ws.id, scope: 'read' };
    const writes: [string, (tx: Parameters<Parameters<typeof asRole>[3]>[0]) => Promise<unknown>][] = [
      [
        'insert expense',
        (tx) =>
          tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id) VALUES ('x', 1, 'other', 'cash')`,
      ],
      ['update expense', (tx) => tx`UPDATE public.personal_transactions SET amount = 2 WHERE id = ${ws.expenseId}`],
      ['delete expense', (tx) => tx`DELETE FROM public.personal_transactions WHERE id = ${ws.expenseId}`],
      ['insert fund', (tx) => tx`INSERT INTO public.funds (name, kind) VALUES ('f', 'Travel')`],
      ['update fund', (tx) => tx`UPDATE public.funds SET name = 'g' WHERE id = ${ws.fundId}`],
      [
        'insert fund transaction',
        (tx) =>
          tx`INSERT INTO public.fund_transactions (fund_id, name, amount, category_id, method_id) VALUES (${ws.fundId}, 'x', 1, 'refund', 'cash')`,
      ],
      ['delete fund transaction', (tx) => tx`DELETE FROM public.fund_transactions WHERE id = ${ws.fundTransactionId}`],
      ['insert contact', (tx) => tx`INSERT INTO public.contacts (name) VALUES ('c')`],
      ['update contact', (tx) => tx`UPDATE public.contacts SET name = 'd' WHERE id = ${ws.contactId}`],
      ['delete contact', (tx) => tx`DELETE FROM public.contacts WHERE id = ${ws.contactId}`],
    ];
    for (const [what, write] of writes) {
      expect([what, await sqlState(asRole(db.admin, 'api_read', claims, write))]).toEqual([what, '42501']);
    }
    const { n } = first(
      await asRole(
        db.admin,
        'api_read',
        claims,
        (tx) => tx<{ n: number }[]>`SELECT count(*)::int AS n FROM public.personal_transactions`,
      ),
    );
    expect(n).toBe(1);
  });

  it("an exchanged read token's JWT runs as api_read through the server's own pool, which refuses writes", async () => {
    const claims = decodeJwt(await exchanged('read'));
    expect(claims.role).toBe('api_read');
    const pool = serverPool(serverUrl(db.url), { max: 1 }); // connects as authenticator, as the server does
    try {
      const state = await sqlState(
        pool.control.begin(async (tx) => {
          await tx`SELECT set_config('role', ${claims.role as string}, true), set_config('request.jwt.claims', ${JSON.stringify(claims)}, true)`;
          await tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id) VALUES ('x', 1, 'other', 'cash')`;
        }),
      );
      expect(state).toBe('42501');
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  it('a write with a read token is 403 "read-only"; with a write token it is stored in the workspace', async () => {
    const post = (jwt: string) =>
      request(t.app)
        .post('/rest/v1/personal_transactions')
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, Prefer: 'return=minimal' })
        .send({ name: 'scoped write', amount: 1, category_id: 'other', method_id: 'cash' });
    const before = await db.admin<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM public.personal_transactions WHERE name = 'scoped write'`;

    const readJwt = await exchanged('read');
    const refused = await post(readJwt).expect(403);
    expect(refused.body).toEqual({
      code: '42501',
      message: 'This token is read-only: it cannot create, change or delete data',
      details: 'permission denied for table personal_transactions',
      hint: 'Writes need a workspace token with the write scope (tally token create --scope write)',
    });
    expect(
      first(
        await db.admin<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM public.personal_transactions WHERE name = 'scoped write'`,
      ).n,
    ).toBe(first(before).n);

    const writeJwt = await exchanged('write');
    const stored = await post(writeJwt).expect(201);
    expect(stored.text).toBe(''); // return=minimal
    const rows = await db.admin<
      { workspace_id: string }[]
    >`SELECT workspace_id FROM public.personal_transactions WHERE name = 'scoped write'`;
    expect(rows).toEqual([{ workspace_id: ws.id }]);
  });
});
