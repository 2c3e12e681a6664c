import request from 'supertest';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// /rest/v1 is a plain node:http handler the server calls before Express (gateway/rest/handler.ts).
// What Express and its middleware gave every surface it must give too: the paths it answers,
// the request limit and its headers, Server-Timing, the one error shape, the body limit, and
// nothing of /rest/v1 reaching the other surfaces or the other way round.

describe('the /rest/v1 handler, beside the Express surfaces', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string;

  beforeAll(async () => {
    ({ db, t, a, jwtA } = await setUpFinance(restEnv({ TALLY_MAX_BODY_BYTES: '2048' })));
  });
  afterAll(() => tearDown(db, t));

  const user = () => ({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwtA}` });
  /** The one error shape: code, message, details and hint, nothing else. */
  const inErrorShape = (body: Record<string, unknown>) => {
    expect(Object.keys(body).sort()).toEqual(['code', 'details', 'hint', 'message']);
    expect(typeof body.code).toBe('string');
    expect(typeof body.message).toBe('string');
  };

  it('answers a read with the limit, Server-Timing and the body Postgres wrote', async () => {
    const res = await request(t.app).get('/rest/v1/funds?select=id,name&order=name').set(user());
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['ratelimit']).toMatch(/^"\d+-in-1min"; r=\d+; t=\d+$/);
    expect(res.headers['ratelimit-policy']).toMatch(/^"\d+-in-1min"; q=\d+; w=60; pk=:[A-Za-z0-9+/=]+:$/);
    expect(res.headers['server-timing']).toMatch(/^pool;dur=[\d.]+, db;dur=[\d.]+$/);
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(res.body.every((f: { id: string }) => typeof f.id === 'string')).toBe(true);
  });

  it('serves the OpenAPI description at /rest/v1, with or without a slash or a query', async () => {
    for (const path of ['/rest/v1', '/rest/v1/', '/rest/v1?x=1']) {
      const res = await request(t.app).get(path).set(user());
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/openapi+json; charset=utf-8');
      expect(res.body.swagger).toBe('2.0');
    }
  });

  it('answers paths and methods it does not serve in the one error shape', async () => {
    const deep = await request(t.app).get('/rest/v1/funds/extra/segments').set(user());
    expect(deep.status).toBe(404);
    inErrorShape(deep.body);
    const root = await request(t.app).post('/rest/v1').set(user()).send({});
    expect(root.status).toBe(404);
    const method = await request(t.app).options('/rest/v1/funds').set(user());
    expect(method.status).toBe(405);
    inErrorShape(method.body);
  });

  it('counts a failed authentication against the address, with the limit headers on the 401', async () => {
    const res = await request(t.app).get('/rest/v1/funds').set({ apikey: TEST_API_KEY, Authorization: 'Bearer nope' });
    expect(res.status).toBe(401);
    inErrorShape(res.body);
    expect(res.headers['ratelimit']).toMatch(/; r=\d+; t=\d+$/);
  });

  it('refuses a body over TALLY_MAX_BODY_BYTES with 413 and writes nothing', async () => {
    const before =
      await db.admin`SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${a.id}`;
    const res = await request(t.app)
      .post('/rest/v1/personal_transactions')
      .set({ ...user(), 'Content-Type': 'application/json' })
      .send(JSON.stringify({ name: 'x'.repeat(4096), amount: 1, category_id: 'other', method_id: 'cash' }));
    expect(res.status).toBe(413);
    inErrorShape(res.body);
    const after =
      await db.admin`SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${a.id}`;
    expect(after).toEqual(before);
  });

  it('leaves every other path to Express: a path that only starts like /rest/v1 is not its', async () => {
    const res = await request(t.app).get('/rest/v10/funds').set(user());
    expect(res.status).toBe(404);
    expect(res.headers['ratelimit']).toBeUndefined(); // the /rest/v1 handler never saw it
    const health = await request(t.app).get('/healthz');
    expect(health.status).toBe(200);
  });

  describe('cross-origin access from a browser, as PostgREST grants it', () => {
    const origin = 'https://app.example.com';

    it.each(['/rest/v1/personal_transactions', '/api/v1/personal_transactions'])(
      'answers the preflight of %s without credentials: any origin, the methods, the asked headers',
      async (path) => {
        const res = await request(t.app)
          .options(path)
          .set('Origin', origin)
          .set('Access-Control-Request-Method', 'POST')
          .set('Access-Control-Request-Headers', 'apikey, content-type, prefer, x-client-info');
        expect(res.status).toBe(200);
        expect(res.text).toBe('');
        expect(res.headers['access-control-allow-origin']).toBe('*');
        expect(res.headers['access-control-allow-credentials']).toBeUndefined();
        expect(res.headers['access-control-allow-methods']).toBe('GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD');
        expect(res.headers['access-control-allow-headers']).toBe(
          'Authorization, apikey, content-type, prefer, x-client-info',
        );
        expect(res.headers['access-control-max-age']).toBe('86400');
        expect(res.headers['ratelimit']).toBeUndefined(); // not counted: it is not a request for data
      },
    );

    it('lets a script read an answer and its Content-Range, errors included, and nothing without an Origin', async () => {
      const read = await request(t.app)
        .get('/rest/v1/personal_transactions?select=id&limit=1')
        .set({ ...user(), Origin: origin, Prefer: 'count=exact' });
      expect(read.status).toBe(200);
      expect(read.headers['access-control-allow-origin']).toBe('*');
      expect(read.headers['access-control-expose-headers']).toContain('Content-Range');
      expect(read.headers['content-range']).toMatch(/^0-0\/\d+$/);

      const refused = await request(t.app).get('/rest/v1/personal_transactions').set('Origin', origin);
      expect(refused.status).toBe(401);
      expect(refused.headers['access-control-allow-origin']).toBe('*');
      inErrorShape(refused.body);

      const sameOrigin = await request(t.app).get('/rest/v1/personal_transactions?select=id&limit=1').set(user());
      expect(sameOrigin.status).toBe(200);
      expect(sameOrigin.headers['access-control-allow-origin']).toBeUndefined();
    });

    it('an OPTIONS without a preflight header is no preflight: it needs credentials like any request', async () => {
      const res = await request(t.app).options('/rest/v1/personal_transactions').set('Origin', origin);
      expect(res.status).toBe(401);
      expect(res.headers['access-control-allow-methods']).toBeUndefined();
    });
  });
});
