import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { first, present } from './harness/present.js';

// The routes of the /api/v1 wrapper: each one's defaults give the same
// result as the same query on /rest/v1; writes answer with the record (201 + Location); ids
// of another workspace are 404 and change nothing; a read token's writes are refused as such.

describe('/api/v1 wrapper routes', () => {
  let db: TestDatabase,
    t: TestApp,
    a: WorkspaceFixture,
    b: WorkspaceFixture,
    jwtA: string,
    jwtB: string,
    readA: string,
    wsTokenA: string;

  beforeAll(async () => {
    // Many calls per test: the rate limit is proven in wrapper-openapi.test.ts.
    ({
      db,
      t,
      a,
      b,
      jwtA,
      jwtB,
      readA,
      tokenA: wsTokenA,
    } = await setUpFinance(restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '10000' })));
    // 25 more expenses in A (more than one default page), with distinct dates.
    await db.admin`
      INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at)
      SELECT ${a.id}, 'Expense ' || i, i, CASE WHEN i % 2 = 0 THEN 'essentials' ELSE 'travel' END, 'cash',
             timestamptz '2024-01-01T00:00:00Z' + i * interval '1 day'
        FROM generate_series(1, 25) i`;
    await db.admin`
      INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id, occurred_at) VALUES
        (${a.id}, ${a.fundId}, 'Hotel', -300, 'hotel', 'credit-card', '2024-05-02T10:00:00Z'),
        (${a.id}, ${a.fundId}, 'Top-up', 50, 'fund-income', 'cash', '2024-05-01T10:00:00Z')`;
    const { id: secondFund } = first(
      await db.admin<{ id: string }[]>`
      INSERT INTO public.funds (workspace_id, name) VALUES (${a.id}, 'Second fund') RETURNING id`,
    );
    await db.admin`
      INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
      VALUES (${a.id}, ${secondFund}, 'Other fund income', 10, 'fund-income', 'cash')`;
    await db.admin`INSERT INTO public.contacts (workspace_id, name) VALUES (${a.id}, 'Aaron'), (${a.id}, 'Zoe')`;
    await db.admin`
      INSERT INTO public.fund_participants (workspace_id, fund_id, contact_id, joined_at)
      SELECT ${a.id}, ${a.fundId}, id, now() + interval '1 day' FROM public.contacts WHERE workspace_id = ${a.id} AND name = 'Aaron'`;
  });
  afterAll(() => tearDown(db, t));

  const bearer = (jwt: string) => ({ Authorization: `Bearer ${jwt}` });
  const api = (jwt = jwtA) => ({
    get: (path: string) => request(t.app).get(`/api/v1${path}`).set(bearer(jwt)),
    post: (path: string, body: unknown) =>
      request(t.app)
        .post(`/api/v1${path}`)
        .set(bearer(jwt))
        .send(body as object),
    patch: (path: string, body: unknown) =>
      request(t.app)
        .patch(`/api/v1${path}`)
        .set(bearer(jwt))
        .send(body as object),
    delete: (path: string) => request(t.app).delete(`/api/v1${path}`).set(bearer(jwt)),
  });
  const rest = (path: string, jwt = jwtA) =>
    request(t.app)
      .get(`/rest/v1${path}`)
      .set({ apikey: TEST_API_KEY, ...bearer(jwt) });

  describe('authentication', () => {
    it('needs an access token: none is 401, not the anon role', async () => {
      const res = await request(t.app).get('/api/v1/personal_transactions');
      expect(res.status).toBe(401);
      expect(res.body).toEqual({
        code: 'PGRST302',
        message: expect.stringContaining('Authorization'),
        details: null,
        hint: expect.stringContaining('/api/v1/token'),
      });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    });

    it('refuses a workspace token sent instead of a JWT, with a hint to exchange it first', async () => {
      const res = await request(t.app).get('/api/v1/contacts').set(bearer(wsTokenA));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('PGRST301');
      expect(res.body.hint).toBe(
        'This is a workspace token: exchange it for an access token at POST /api/v1/token first',
      );
    });

    it('refuses a malformed or forged JWT', async () => {
      expect((await request(t.app).get('/api/v1/contacts').set('Authorization', 'Basic abc')).status).toBe(401);
      expect(
        (
          await request(t.app)
            .get('/api/v1/contacts')
            .set(bearer(jwtA.slice(0, -3) + 'abc'))
        ).status,
      ).toBe(401);
    });

    it('needs no apikey, and the exchanged token works end to end', async () => {
      const ex = await request(t.app).post('/api/v1/token').set(bearer(wsTokenA));
      expect(ex.status).toBe(200);
      const res = await api(ex.body.access_token).get('/contacts');
      expect(res.status).toBe(200);
      expect(res.body.map((c: { name: string }) => c.name)).toContain('Aaron');
    });
  });

  describe('lists: the defaults of each resource equal the same /rest/v1 query', () => {
    it('GET /personal_transactions: select=*, order=occurred_at.desc, limit=20', async () => {
      const res = await api().get('/personal_transactions');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toHaveLength(20);
      const same = await rest('/personal_transactions?select=*&order=occurred_at.desc&limit=20');
      expect(res.body).toEqual(same.body);
      const dates = res.body.map((r: { occurred_at: string }) => Date.parse(r.occurred_at));
      expect([...dates].sort((x, y) => y - x)).toEqual(dates);
      expect(Object.keys(res.body[0]).sort()).toEqual([
        'amount',
        'category_id',
        'created_at',
        'id',
        'method_id',
        'name',
        'note',
        'occurred_at',
        'workspace_id',
      ]);
      expect(res.body.every((r: { workspace_id: string }) => r.workspace_id === a.id)).toBe(true);
    });

    it("GET /personal_transactions forwards the client's own select, order, limit, offset and filters", async () => {
      const qs = 'select=name,amount&order=amount.asc&limit=3&offset=1&category_id=eq.travel';
      const res = await api().get(`/personal_transactions?${qs}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual([
        { name: 'Expense 3', amount: 3 },
        { name: 'Expense 5', amount: 5 },
        { name: 'Expense 7', amount: 7 },
      ]);
      expect(res.body).toEqual((await rest(`/personal_transactions?${qs}`)).body);
    });

    it('passes Prefer: count=exact through as Content-Range', async () => {
      const res = await api().get('/personal_transactions').set('Prefer', 'count=exact');
      expect(res.status).toBe(206); // a partial page of the total, as on /rest/v1
      expect(res.headers['content-range']).toBe('0-19/26');
    });

    it('passes a gateway error through in the one shape', async () => {
      const res = await api().get('/personal_transactions?select=nope');
      expect(res.status).toBe(400);
      expect(Object.keys(res.body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    });

    it('GET /funds: select=*,fund_transactions(*)', async () => {
      const res = await api().get('/funds');
      expect(res.status).toBe(200);
      expect(res.body).toEqual((await rest('/funds?select=*,fund_transactions(*)')).body);
      expect(res.body).toHaveLength(2);
      const main = res.body.find((f: { id: string }) => f.id === a.fundId);
      expect(main.fund_transactions.map((x: { name: string }) => x.name).sort()).toEqual([
        'Contribution',
        'Hotel',
        'Top-up',
      ]);
    });

    it('GET /fund_transactions?fund_id=eq.<uuid>: one fund, order=occurred_at.desc', async () => {
      const res = await api().get(`/fund_transactions?fund_id=eq.${a.fundId}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual((await rest(`/fund_transactions?fund_id=eq.${a.fundId}&order=occurred_at.desc`)).body);
      expect(res.body.map((x: { name: string }) => x.name)).toEqual(['Contribution', 'Hotel', 'Top-up']); // Contribution: now()
      // A bare uuid reads as eq.<uuid>; no fund_id lists every fund's transactions.
      expect((await api().get(`/fund_transactions?fund_id=${a.fundId}`)).body).toEqual(res.body);
      const all = await api().get('/fund_transactions');
      expect(all.body).toHaveLength(4);
      expect(all.body).toEqual((await rest('/fund_transactions?order=occurred_at.desc')).body);
    });

    it('GET /contacts: every contact by name', async () => {
      const res = await api().get('/contacts');
      expect(res.status).toBe(200);
      expect(res.body).toEqual((await rest('/contacts?select=*&order=name.asc,id.asc')).body);
      expect(res.body.map((c: { name: string }) => c.name)).toEqual(['Aaron', 'Zoe', 'alpha contact']); // the database's collation (C)
    });

    it('GET /categories?domain=… and GET /payment_methods read the live lists', async () => {
      const expenses = await api().get('/categories?domain=expenses');
      expect(expenses.status).toBe(200);
      expect(expenses.body.map((c: { id: string }) => c.id)).toEqual([
        'beauty-care',
        'clothing',
        'credit-repayment',
        'entertainment',
        'essentials',
        'family-support',
        'fixed-expenses',
        'food-drinks',
        'installment-payment',
        'investments',
        'local-transport',
        'other',
        'sports',
        'travel',
        'work-expenses',
      ]);
      const funds = await api().get('/categories?domain=funds');
      expect(funds.body.map((c: { id: string }) => c.id)).toEqual([
        'clothing',
        'currency-exchange',
        'entertainment',
        'fine',
        'flight-tickets',
        'food-drinks',
        'fund-income',
        'hotel',
        'local-transport',
        'other',
        'refund',
      ]);
      expect(funds.body[0]).toEqual({ id: 'clothing', name: 'Clothing', for_expenses: true, for_funds: true });
      expect((await api().get('/categories')).body).toHaveLength(21);
      // Names every object has (constructor, toString, __proto__) are no choice either.
      for (const domain of ['cars', 'constructor', 'toString', '__proto__', 'hasOwnProperty']) {
        const bad = await api().get(`/categories?domain=${domain}`);
        expect([domain, bad.status, bad.body.message]).toEqual([domain, 400, 'domain must be one of: expenses, funds']);
      }
      const methods = await api().get('/payment_methods');
      expect(methods.body.map((m: { id: string }) => m.id)).toEqual([
        'bank-transfer',
        'cash',
        'credit-card',
        'installment',
        'mobile-wallet',
      ]);
    });
  });

  describe('GET /funds/{id}', () => {
    it('answers the fund with its balance, ledger newest first and participants', async () => {
      const res = await api().get(`/funds/${a.fundId}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        id: a.fundId,
        name: 'alpha fund',
        kind: 'Travel',
        status: 'Upcoming',
        target_amount: 1000,
        balance: -150,
      });
      expect(res.body.fund_transactions.map((x: { amount: number }) => x.amount)).toEqual([100, -300, 50]);
      // Participants in the order they joined.
      expect(res.body.participants).toEqual([
        expect.objectContaining({
          id: a.contactId,
          name: 'alpha contact',
          phone: '+1 555 0100',
          joined_at: expect.any(String),
        }),
        expect.objectContaining({ name: 'Aaron', nickname: null, joined_at: expect.any(String) }),
      ]);
      expect(res.body).not.toHaveProperty('fund_participants');
    });

    it('an unknown id or one that is not a uuid is 404 in the error shape', async () => {
      const res = await api().get('/funds/00000000-0000-4000-8000-000000000000');
      expect(res.status).toBe(404);
      expect(res.body).toEqual({
        code: 'TLY100',
        message: 'No fund with id 00000000-0000-4000-8000-000000000000 in this workspace',
        details: null,
        hint: expect.any(String),
      });
      expect((await api().get('/funds/not-a-uuid')).status).toBe(404);
    });
  });

  describe('writes', () => {
    it('POST /personal_transactions: 201, the record, its Location; GET, PATCH and DELETE it by id', async () => {
      const created = await api().post('/personal_transactions', {
        name: 'Coffee',
        amount: 3.2,
        category_id: 'food-drinks',
        method_id: 'mobile-wallet',
        occurred_at: '2026-03-14T08:30:00Z',
        note: 'flat white',
      });
      expect(created.status).toBe(201);
      const id: string = created.body.id;
      expect(created.headers.location).toBe(`/api/v1/personal_transactions/${id}`);
      expect(created.body).toMatchObject({
        name: 'Coffee',
        amount: 3.2,
        category_id: 'food-drinks',
        method_id: 'mobile-wallet',
        note: 'flat white',
        workspace_id: a.id,
      });
      expect(Date.parse(created.body.occurred_at)).toBe(Date.parse('2026-03-14T08:30:00Z'));
      const [row] =
        await db.admin`SELECT workspace_id, name, amount::float8 AS amount FROM personal_transactions WHERE id = ${id}`;
      expect(row).toEqual({ workspace_id: a.id, name: 'Coffee', amount: 3.2 });

      const read = await api().get(present(created.headers.location).replace('/api/v1', ''));
      expect(read.status).toBe(200);
      expect(read.body).toEqual(created.body);

      const changed = await api().patch(`/personal_transactions/${id}`, { amount: 4, note: null });
      expect(changed.status).toBe(200);
      expect(changed.body).toMatchObject({ id, name: 'Coffee', amount: 4, note: null });
      const [after] = await db.admin`SELECT amount::float8 AS amount, note FROM personal_transactions WHERE id = ${id}`;
      expect(after).toEqual({ amount: 4, note: null });

      const deleted = await api().delete(`/personal_transactions/${id}`);
      expect(deleted.status).toBe(200);
      expect(deleted.body).toMatchObject({ id, name: 'Coffee', amount: 4 });
      expect(await db.admin`SELECT 1 FROM personal_transactions WHERE id = ${id}`).toHaveLength(0);
      expect((await api().delete(`/personal_transactions/${id}`)).status).toBe(404);
      expect((await api().patch(`/personal_transactions/${id}`, { amount: 5 })).status).toBe(404);
    });

    it('POST /fund_transactions records against a fund; PATCH and DELETE it by id', async () => {
      const created = await api().post('/fund_transactions', {
        fund_id: a.fundId,
        name: 'Taxi',
        amount: -20.5,
        category_id: 'local-transport',
        method_id: 'cash',
      });
      expect(created.status).toBe(201);
      expect(created.headers.location).toBe(`/api/v1/fund_transactions/${created.body.id}`);
      expect(created.body).toMatchObject({ fund_id: a.fundId, name: 'Taxi', amount: -20.5, workspace_id: a.id });
      const { balance } = first(
        await db.admin`SELECT balance(f)::float8 AS balance FROM funds f WHERE id = ${a.fundId}`,
      );
      expect(balance).toBe(-170.5);
      const changed = await api().patch(`/fund_transactions/${created.body.id}`, { category_id: 'fine' });
      expect(changed.status).toBe(200);
      expect(changed.body.category_id).toBe('fine');
      const deleted = await api().delete(`/fund_transactions/${created.body.id}`);
      expect(deleted.status).toBe(200);
      expect(deleted.body.id).toBe(created.body.id);
      expect(await db.admin`SELECT 1 FROM fund_transactions WHERE id = ${created.body.id}`).toHaveLength(0);
    });

    it('POST /funds creates an Upcoming fund; PATCH /funds/{id} sets any of the three statuses', async () => {
      const created = await api().post('/funds', {
        name: 'Ski trip',
        kind: 'Travel',
        target_amount: 2000,
        currency: 'CHF',
        start_date: '2026-01-10',
        end_date: '2026-01-17',
      });
      expect(created.status).toBe(201);
      expect(created.headers.location).toBe(`/api/v1/funds/${created.body.id}`);
      expect(created.body).toMatchObject({
        name: 'Ski trip',
        status: 'Upcoming',
        currency: 'CHF',
        target_amount: 2000,
        start_date: '2026-01-10',
      });
      for (const status of ['Completed', 'Upcoming', 'In Progress']) {
        const res = await api().patch(`/funds/${created.body.id}`, { status });
        expect(res.status).toBe(200);
        expect(res.body.status).toBe(status);
      }
      const row = first(await db.admin`SELECT status FROM funds WHERE id = ${created.body.id}`);
      expect(row.status).toBe('In Progress');
      const bad = await api().patch(`/funds/${created.body.id}`, { status: 'Done' });
      expect(bad.status).toBe(400);
      expect(bad.body.message).toBe('Invalid request body: status must be one of: Upcoming, In Progress, Completed');
      const detail = await api().get(`/funds/${created.body.id}`);
      expect(detail.body).toMatchObject({ balance: 0, fund_transactions: [], participants: [] });
    });

    it('POST /contacts, GET, PATCH and DELETE /contacts/{id}', async () => {
      const created = await api().post('/contacts', {
        name: 'Mia',
        nickname: 'M',
        phone: '+44 20 7946 0000',
        email: 'mia@example.com',
        gender: 'f',
        nationality: 'UK',
      });
      expect(created.status).toBe(201);
      expect(created.headers.location).toBe(`/api/v1/contacts/${created.body.id}`);
      expect((await api().get(`/contacts/${created.body.id}`)).body).toEqual(created.body);
      const changed = await api().patch(`/contacts/${created.body.id}`, { nickname: 'Mimi', email: null });
      expect(changed.body).toMatchObject({ name: 'Mia', nickname: 'Mimi', email: null, nationality: 'UK' });
      expect((await api().delete(`/contacts/${created.body.id}`)).status).toBe(200);
      expect(await db.admin`SELECT 1 FROM contacts WHERE id = ${created.body.id}`).toHaveLength(0);
    });

    it('a fund transaction for a fund of another workspace is refused and not written', async () => {
      const before = await db.admin`SELECT count(*)::int AS n FROM fund_transactions`;
      const res = await api().post('/fund_transactions', {
        fund_id: b.fundId,
        name: 'Sneaky',
        amount: 1,
        category_id: 'other',
        method_id: 'cash',
      });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('23503');
      expect(await db.admin`SELECT count(*)::int AS n FROM fund_transactions`).toEqual(before);
    });
  });

  describe('a read token', () => {
    it('reads, but every write is 403 with the read-only message and nothing changes', async () => {
      expect((await api(readA).get('/personal_transactions')).status).toBe(200);
      const before = await db.admin`SELECT count(*)::int AS n FROM personal_transactions`;
      const writes = [
        api(readA).post('/personal_transactions', { name: 'No', amount: 1, category_id: 'other', method_id: 'cash' }),
        api(readA).post('/funds', { name: 'No' }),
        api(readA).post('/contacts', { name: 'No' }),
        api(readA).post('/fund_transactions', {
          fund_id: a.fundId,
          name: 'No',
          amount: 1,
          category_id: 'other',
          method_id: 'cash',
        }),
        api(readA).patch(`/personal_transactions/${a.expenseId}`, { name: 'Changed' }),
        api(readA).patch(`/funds/${a.fundId}`, { status: 'Completed' }),
        api(readA).delete(`/contacts/${a.contactId}`),
        api(readA).delete(`/fund_transactions/${a.fundTransactionId}`),
      ];
      for (const res of await Promise.all(writes)) {
        expect(res.status).toBe(403);
        expect(res.body.message).toBe('This token is read-only: it cannot create, change or delete data');
      }
      expect(await db.admin`SELECT count(*)::int AS n FROM personal_transactions`).toEqual(before);
      expect(first(await db.admin`SELECT name FROM personal_transactions WHERE id = ${a.expenseId}`).name).toBe(
        'alpha lunch',
      );
      expect(first(await db.admin`SELECT status FROM funds WHERE id = ${a.fundId}`).status).toBe('Upcoming');
      expect(await db.admin`SELECT 1 FROM contacts WHERE id = ${a.contactId}`).toHaveLength(1);
    });
  });

  describe('workspace isolation', () => {
    it('lists of A never hold a record of B', async () => {
      for (const path of ['/personal_transactions?limit=1000', '/funds', '/fund_transactions', '/contacts']) {
        const res = await api().get(path);
        expect(res.status).toBe(200);
        expect(JSON.stringify(res.body)).not.toContain(b.id);
        expect(JSON.stringify(res.body)).not.toContain('beta');
      }
      expect((await api().get(`/fund_transactions?fund_id=eq.${b.fundId}`)).body).toEqual([]);
    });

    it("B's ids through A's token: GET, PATCH and DELETE are 404 and B is unchanged", async () => {
      const snapshot = () => db.admin`
        SELECT (SELECT row_to_json(p)::text FROM personal_transactions p WHERE id = ${b.expenseId}) AS expense,
               (SELECT row_to_json(f)::text FROM funds f WHERE id = ${b.fundId}) AS fund,
               (SELECT row_to_json(t)::text FROM fund_transactions t WHERE id = ${b.fundTransactionId}) AS fund_transaction,
               (SELECT row_to_json(c)::text FROM contacts c WHERE id = ${b.contactId}) AS contact`;
      const before = await snapshot();
      const calls = [
        api().get(`/personal_transactions/${b.expenseId}`),
        api().patch(`/personal_transactions/${b.expenseId}`, { name: 'Hijacked' }),
        api().delete(`/personal_transactions/${b.expenseId}`),
        api().get(`/funds/${b.fundId}`),
        api().patch(`/funds/${b.fundId}`, { status: 'Completed' }),
        api().get(`/fund_transactions/${b.fundTransactionId}`),
        api().patch(`/fund_transactions/${b.fundTransactionId}`, { amount: 1 }),
        api().delete(`/fund_transactions/${b.fundTransactionId}`),
        api().get(`/contacts/${b.contactId}`),
        api().patch(`/contacts/${b.contactId}`, { name: 'Hijacked' }),
        api().delete(`/contacts/${b.contactId}`),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(404);
        expect(res.body.code).toBe('TLY100');
      }
      expect(await snapshot()).toEqual(before);
      expect(first(before).expense).toContain('beta lunch');
      // And B itself still sees its records.
      expect((await api(jwtB).get(`/personal_transactions/${b.expenseId}`)).status).toBe(200);
    });
  });
});
