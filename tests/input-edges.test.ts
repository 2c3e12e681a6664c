import request from 'supertest';
import type { TestApp } from './harness/app.js';
import { startTestApp } from './harness/app.js';
import type { TestDatabase } from './harness/db.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { tokenFor } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// Input at the edges of every surface: what a client writes in a path, a query string or a
// header is read as it says, or refused with a 4xx in the one error shape, never a 500.

describe('input at the edges', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwt: string, token: string;
  let proxied: TestApp;

  beforeAll(async () => {
    ({ db, t, a, jwtA: jwt, tokenA: token } = await setUpFinance(restEnv()));
    proxied = startTestApp(db.url, restEnv({ TALLY_TRUST_PROXY: 'true' }));
  });
  afterAll(async () => {
    await proxied.close();
    await tearDown(db, t);
  });

  const shape = { code: expect.any(String), message: expect.any(String), details: null, hint: expect.anything() };

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty'])(
    'GET /settings/static/%s is a 404, not a 500',
    async (name) => {
      const res = await request(t.app).get(`/settings/static/${name}`);
      expect(res.status).toBe(404);
    },
  );

  describe('a malformed percent-escape in a query value is a 400 on every surface', () => {
    it.each([
      ['/rest/v1', `/rest/v1/contacts?name=eq.100%zz`, { apikey: TEST_API_KEY }],
      ['/rest/v1, bytes that are not UTF-8', `/rest/v1/contacts?name=eq.%ff%fe`, { apikey: TEST_API_KEY }],
      ['/api/v1', `/api/v1/contacts?name=eq.100%`, {}],
    ])('%s', async (_surface, path, headers) => {
      const res = await request(t.app)
        .get(path)
        .set({ Authorization: `Bearer ${jwt}`, ...headers });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ ...shape, code: 'PGRST100', message: 'Invalid percent-encoding in the query string' });
    });

    it('/mcp', async () => {
      const res = await request(t.app)
        .post(`/mcp?token=${token}&x=%zz`)
        .set({ Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' })
        .send('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
      expect(res.status).toBe(400);
      expect(res.body.message).toBe('Invalid percent-encoding in the query string');
    });

    it('a well-formed escape still reads as its text', async () => {
      const res = await request(t.app)
        .get(`/rest/v1/contacts?select=name&name=eq.${encodeURIComponent(a.name + ' contact')}`)
        .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
      expect(res.status).toBe(200);
      expect(res.body).toEqual([{ name: `${a.name} contact` }]);
    });
  });

  describe('/mcp with two different workspace tokens', () => {
    it('refuses them, as the exchange does, rather than picking one', async () => {
      const other = await tokenFor(db.admin, a.id, 'read');
      const res = await request(t.app)
        .post(`/mcp?token=${token}`)
        .set({
          Accept: 'application/json, text/event-stream',
          'Content-Type': 'application/json',
          Authorization: `Bearer ${other.token}`,
        })
        .send('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ ...shape, code: 'PGRST301', message: 'Two different workspace tokens were sent' });
    });

    it('takes the same token given in both places', async () => {
      const res = await request(t.app)
        .post(`/mcp?token=${token}`)
        .set({
          Accept: 'application/json, text/event-stream',
          'Content-Type': 'application/json',
          Authorization: `Bearer ${token}`,
        })
        .send('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
      expect(res.status).toBe(200);
    });
  });

  describe('behind a trusted proxy, a long X-Forwarded-For', () => {
    const forwarded = 'x'.repeat(250);
    it.each([
      ['/rest/v1', (r: request.Agent) => r.get('/rest/v1/contacts').set({ apikey: TEST_API_KEY })],
      ['/api/v1', (r: request.Agent) => r.get('/api/v1/contacts')],
      ['the exchange', (r: request.Agent) => r.post('/api/v1/token').set('Authorization', 'Bearer tally_ws_nope')],
      [
        '/settings',
        (r: request.Agent) => r.post('/settings/sign-in').type('form').send({ email: 'a@b.c', password: 'x' }),
      ],
    ])('is not a 500 on %s', async (_surface, send) => {
      const res = await send(request.agent(proxied.app)).set('X-Forwarded-For', `${forwarded}, 10.0.0.1, ${forwarded}`);
      expect(res.status).toBeLessThan(500);
    });
  });
});
