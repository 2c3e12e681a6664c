import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// /api/v1 is a plain node:http handler with a route table of its own, the token exchange one of
// its routes (gateway/wrapper/handler.ts). These pin what it answered as an Express router and
// must go on answering: how paths match (case, a trailing slash, percent-escapes, HEAD), that
// every request under /api/v1 but the exchange, the document and the reference page needs a JWT
// first, the headers, the body limit, the limit on failed authentications, and the paths that
// are not its: the reference page (a page, on Express) and the paths that only start like it.

const LIMIT = 30;

describe('the /api/v1 handler, beside the Express surfaces', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string, readA: string, tokenA: string;

  beforeAll(async () => {
    ({ db, t, a, jwtA, readA, tokenA } = await setUpFinance(
      restEnv({ TALLY_MAX_BODY_BYTES: '2048', TALLY_RATE_LIMIT_PER_MINUTE: String(LIMIT) }),
    ));
  });
  afterAll(() => tearDown(db, t));

  const user = (jwt = jwtA) => ({ Authorization: `Bearer ${jwt}` });
  /** The one error shape: code, message, details and hint, nothing else. */
  const inErrorShape = (body: Record<string, unknown>) => {
    expect(Object.keys(body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    expect(typeof body.code).toBe('string');
  };
  const expenses = async () =>
    (
      await db.admin<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${a.id}`
    )[0]!.n;

  it('answers a list with its headers: type, range, limit, Server-Timing and the length', async () => {
    const res = await request(t.app).get('/api/v1/personal_transactions?select=id,name').set(user());
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['content-range']).toMatch(/^0-\d+\/\*$/);
    expect(res.headers['ratelimit']).toMatch(/; r=\d+; t=\d+$/);
    expect(res.headers['server-timing']).toMatch(/^pool;dur=[\d.]+, db;dur=[\d.]+$/);
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(res.body.length).toBeGreaterThan(0);
  });

  it('matches paths without regard to case and with one trailing slash, as before', async () => {
    const plain = await request(t.app).get('/api/v1/contacts').set(user());
    for (const path of ['/API/V1/Contacts', '/api/v1/contacts/', '/api/v1/contacts?']) {
      const res = await request(t.app).get(path).set(user());
      expect([path, res.status]).toEqual([path, 200]);
      expect(res.body).toEqual(plain.body);
    }
    const double = await request(t.app).get('/api/v1/contacts//').set(user());
    expect(double.status).toBe(404);
    inErrorShape(double.body);
    expect((await request(t.app).get('/api/v1//contacts').set(user())).status).toBe(404);
  });

  it('decodes percent-escapes in a record id, not in the names of the routes', async () => {
    const escaped = a.expenseId.replace(/-/g, '%2D');
    const one = await request(t.app).get(`/api/v1/personal_transactions/${escaped}`).set(user());
    expect(one.status).toBe(200);
    expect(one.body.id).toBe(a.expenseId);
    const name = await request(t.app).get('/api/v1/personal%5Ftransactions').set(user());
    expect(name.status).toBe(404);
    inErrorShape(name.body);
    const malformed = await request(t.app).get('/api/v1/personal_transactions/%zz').set(user());
    expect(malformed.status).toBe(400);
    inErrorShape(malformed.body);
  });

  it('answers HEAD as GET without a body', async () => {
    const res = await request(t.app).head('/api/v1/personal_transactions').set(user());
    expect(res.status).toBe(200);
    expect(res.headers['content-range']).toMatch(/^0-\d+\/\*$/);
    expect(res.text ?? '').toBe('');
    const one = await request(t.app).head(`/api/v1/contacts/${a.contactId}`).set(user());
    expect(one.status).toBe(200);
  });

  it('asks for a JWT before anything else under /api/v1, then answers a method a path does not take with 405, a path it does not serve with 404', async () => {
    const anonymous = await request(t.app).put('/api/v1/nothing/here');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer/);
    for (const [method, path, status, allow] of [
      ['put', '/api/v1/personal_transactions', 405, 'GET, HEAD, POST'],
      ['delete', `/api/v1/funds/${a.fundId}`, 405, 'GET, HEAD, PATCH'],
      ['post', '/api/v1/categories', 405, 'GET, HEAD'],
      ['get', '/api/v1/token', 405, 'POST'],
      ['get', '/api/v1', 404, undefined],
      ['post', '/api/v1/openapi.json', 404, undefined],
    ] as const) {
      const res = await request(t.app)[method](path).set(user());
      expect([method, path, res.status, res.headers['allow']]).toEqual([method, path, status, allow]);
      inErrorShape(res.body);
      expect(res.body.code).toBe(status === 405 ? 'PGRST117' : 'PGRST125');
    }
    const funds = await db.admin`SELECT 1 FROM public.funds WHERE id = ${a.fundId}`;
    expect(funds).toHaveLength(1);
  });

  it('keeps Server-Timing and the error shape on an error after the database was asked', async () => {
    const res = await request(t.app).get('/api/v1/contacts/00000000-0000-4000-8000-000000000000').set(user());
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('TLY100');
    expect(res.headers['server-timing']).toMatch(/^pool;dur=[\d.]+, db;dur=[\d.]+$/);
  });

  it('answers a write with 201, Location and the record; a read token is refused and nothing is written', async () => {
    const before = await expenses();
    const body = { name: 'Tea', amount: 3, category_id: 'food-drinks', method_id: 'cash' };
    const refused = await request(t.app).post('/api/v1/personal_transactions').set(user(readA)).send(body);
    expect(refused.status).toBe(403);
    expect(await expenses()).toBe(before);
    const res = await request(t.app).post('/api/v1/personal_transactions').set(user()).send(body);
    expect(res.status).toBe(201);
    expect(res.headers['location']).toBe(`/api/v1/personal_transactions/${res.body.id}`);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(await expenses()).toBe(before + 1);
  });

  it('refuses a body over TALLY_MAX_BODY_BYTES with 413 and writes nothing', async () => {
    const before = await expenses();
    const res = await request(t.app)
      .post('/api/v1/personal_transactions')
      .set({ ...user(), 'Content-Type': 'application/json' })
      .send(JSON.stringify({ name: 'x'.repeat(4096), amount: 1, category_id: 'other', method_id: 'cash' }));
    expect(res.status).toBe(413);
    inErrorShape(res.body);
    expect(await expenses()).toBe(before);
  });

  it('answers malformed JSON with the same 400 as /rest/v1, and writes nothing', async () => {
    const before = await expenses();
    const send = (path: string, headers: Record<string, string>) =>
      request(t.app)
        .post(path)
        .set({ ...headers, 'Content-Type': 'application/json' })
        .send('{"name": "Tea", amount: 3}');
    const wrapper = await send('/api/v1/personal_transactions', user());
    const rest = await send('/rest/v1/personal_transactions', { ...user(), apikey: TEST_API_KEY });
    expect([wrapper.status, wrapper.body]).toEqual([
      400,
      { code: 'PGRST102', message: 'Empty or invalid json', details: null, hint: null },
    ]);
    expect([rest.status, rest.body]).toEqual([wrapper.status, wrapper.body]);
    expect(await expenses()).toBe(before);
  });

  it('answers the exchange and the document without a JWT, and leaves the reference page to Express, whatever the case', async () => {
    const exchanged = await request(t.app).post('/API/V1/Token').set('x-api-token', tokenA);
    expect(exchanged.status).toBe(200);
    expect(typeof exchanged.body.access_token).toBe('string');
    const docs = await request(t.app).get('/api/v1/docs');
    expect([docs.status, docs.headers['location']]).toEqual([301, '/api/v1/docs/']);
    for (const path of ['/openapi.json', '/api/v1/openapi.json', '/API/V1/openapi.json/']) {
      const doc = await request(t.app).get(path);
      expect([path, doc.status]).toEqual([path, 200]);
      expect(doc.body.openapi).toMatch(/^3\./);
    }
  });

  it('leaves paths that only start like /api/v1 to Express: no JWT asked, 404', async () => {
    for (const path of ['/api/v10/contacts', '/api/v1x', '/api/v1.json']) {
      const res = await request(t.app).get(path);
      expect([path, res.status]).toEqual([path, 404]);
      expect(res.headers['www-authenticate']).toBeUndefined();
      expect(res.headers['ratelimit']).toBeUndefined();
    }
  });

  // Last: it spends this address's budget.
  it('counts failed authentications against the address, and its 429 then wins over the 401', async () => {
    let res = await request(t.app).get('/api/v1/contacts').set('Authorization', 'Bearer nope');
    expect(res.status).toBe(401);
    expect(res.headers['ratelimit']).toMatch(/; r=\d+; t=\d+$/);
    for (let i = 0; i <= LIMIT && res.status === 401; i++)
      res = await request(t.app).get('/api/v1/contacts').set('Authorization', 'Bearer nope');
    expect(res.status).toBe(429);
    inErrorShape(res.body);
    expect((await request(t.app).get('/api/v1/contacts')).status).toBe(429); // no Authorization either
    expect((await request(t.app).get('/api/v1/contacts').set(user())).status).toBe(200); // the token's own budget
  });
});
