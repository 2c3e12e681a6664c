import request from 'supertest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// What a newcomer's mistakes are answered with: each says what happened and what to do, in the
// one error shape, and `/` says what the server serves.

describe('mistakes that explain themselves, and the landing page', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwtA: string, tokenA: string;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    ({ db, t, a, jwtA, tokenA } = await setUpFinance(restEnv()));
    server = createServer(t.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await tearDown(db, t);
  });

  it('says an empty bearer is empty, on the exchange and on the JWT surfaces', async () => {
    for (const res of [
      await request(t.app).post('/api/v1/token').set('Authorization', 'Bearer '),
      await request(t.app).post('/functions/v1/api-token').set('Authorization', 'Bearer'),
      await request(t.app).get('/api/v1/contacts').set('Authorization', 'Bearer '),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body).toEqual({
        code: 'PGRST302',
        message: 'The Authorization header says "Bearer" with no token after it',
        details: null,
        hint: 'Is the shell variable that should hold the token empty? Send "Authorization: Bearer <token>"',
      });
    }
  });

  it('answers a GET of the token exchange with 405 and Allow: POST, whatever token it carries', async () => {
    for (const res of [
      await request(t.app).get('/api/v1/token').set('Authorization', `Bearer ${tokenA}`),
      await request(t.app).get('/api/v1/token'),
      await request(t.app).get('/functions/v1/api-token'),
    ]) {
      expect(res.status).toBe(405);
      expect(res.headers['allow']).toBe('POST');
      expect(res.body).toMatchObject({ code: 'PGRST117', message: 'Unsupported HTTP method: GET' });
      expect(res.body.hint).toMatch(/^POST a workspace token /);
    }
  });

  it('reads a body without Content-Type as JSON, and says how to send JSON when it is form data', async () => {
    const body = JSON.stringify({ name: 'Untyped', amount: 3, category_id: 'other', method_id: 'cash' });
    // fetch sends a byte array without a Content-Type.
    const bare = await fetch(`${base}/api/v1/personal_transactions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${jwtA}` },
      body: new TextEncoder().encode(body),
    });
    expect(bare.status).toBe(201);
    expect(await bare.json()).toMatchObject({ name: 'Untyped' });
    // `curl -d` alone sends form data.
    const form = await request(t.app)
      .post('/api/v1/personal_transactions')
      .set({ Authorization: `Bearer ${jwtA}`, 'Content-Type': 'application/x-www-form-urlencoded' })
      .send(body);
    expect(form.status).toBe(415);
    expect(form.body).toEqual({
      code: 'PGRST107',
      message: 'Content-Type not acceptable: application/x-www-form-urlencoded',
      details: null,
      hint: 'Send the body as JSON with "Content-Type: application/json" (curl: -H "Content-Type: application/json")',
    });
    const rows =
      await db.admin`SELECT name FROM public.personal_transactions WHERE workspace_id = ${a.id} AND name = 'Untyped'`;
    expect(rows).toHaveLength(1); // the form-data one wrote nothing
  });

  it('names what exists for an unknown /api/v1 path, and the record id a change of a collection needs', async () => {
    const unknown = await request(t.app).get('/api/v1/expenses').set('Authorization', `Bearer ${jwtA}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'PGRST125' });
    expect(unknown.body.hint).toBe(
      'Did you mean /api/v1/personal_transactions? The resources under /api/v1: personal_transactions, funds, fund_transactions, contacts, activity, categories, payment_methods (described in /api/v1/openapi.json)',
    );
    const patch = await request(t.app)
      .patch('/api/v1/funds')
      .set({ Authorization: `Bearer ${jwtA}`, 'Content-Type': 'application/json' })
      .send('{"status":"Completed"}');
    expect(patch.status).toBe(405);
    expect(patch.headers['allow']).toBe('GET, HEAD, POST');
    expect(patch.body).toMatchObject({
      code: 'PGRST117',
      message: 'Unsupported HTTP method: PATCH',
      hint: 'PATCH changes one record: /api/v1/funds/{id} (the ids are in GET /api/v1/funds?select=id)',
    });
    const elsewhere = await request(t.app).get('/nothing-here');
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body).toMatchObject({ code: 'PGRST125', hint: 'GET / lists what this server serves' });
  });

  it('answers / with a landing page that links the docs, the descriptions, health and settings', async () => {
    const page = await request(t.app).get('/').set('Accept', 'text/html,application/xhtml+xml,*/*;q=0.8');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    for (const path of ['/api/v1/docs/', '/api/v1/openapi.json', '/rest/v1/', '/healthz', '/readyz', '/settings'])
      expect(page.text).toContain(`<a href="${path}">`);
    // Every link answers (the description of /rest/v1 needs the apikey: 401 without it).
    for (const path of ['/api/v1/docs/', '/api/v1/openapi.json', '/healthz', '/readyz', '/settings']) {
      const res = await request(t.app).get(path).redirects(2);
      expect([path, res.status]).toEqual([path, 200]);
    }
    const json = await request(t.app).get('/');
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.stringify(json.body)).toContain('/api/v1/openapi.json');
  });
});
