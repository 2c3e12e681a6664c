import request from 'supertest';
import type { App } from '../gateway/server.js';
import { revokeToken } from '../gateway/admin/tokens.js';
import { setApiEnabled } from '../gateway/admin/workspaces.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { tools } from '../mcp/tools.js';

// Workspace tokens on the real surfaces, with two Tally instances on one database: the token exchange,
// the direct table interface /rest/v1 and MCP (?token=). Revocation and the API switch act on
// the very next request on each; a read token's writes are refused as read-only; one token has
// one rate limit over all of them. The /api/v1 wrapper is checked alongside.

describe('access on every surface, two instances', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  let other: WorkspaceFixture;
  const apps: TestApp[] = [];
  let a: TestApp;
  let b: TestApp;

  const start = (env: Record<string, string> = {}): TestApp => {
    const t = startTestApp(db.url, restEnv({ TALLY_RATE_LIMIT_PER_MINUTE: '1000', ...env }));
    apps.push(t);
    return t;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin);
    other = await workspaceWithData(db.admin);
    a = start();
    b = start();
  });
  afterAll(async () => {
    await Promise.all(apps.map((t) => t.close()));
    await db.drop();
  });
  beforeEach(() => db.admin`DELETE FROM tally.rate_limits`);

  const exchange = (app: App, token: string) =>
    request(app).post('/api/v1/token').set('Authorization', `Bearer ${token}`);
  const jwtFor = async (app: App, token: string) =>
    (await exchange(app, token).expect(200)).body.access_token as string;
  const rest = (app: App, jwt: string) =>
    request(app)
      .get('/rest/v1/personal_transactions?select=id,name')
      .set('apikey', TEST_API_KEY)
      .set('Authorization', `Bearer ${jwt}`);
  const wrapper = (app: App, jwt: string) =>
    request(app).get('/api/v1/personal_transactions').set('Authorization', `Bearer ${jwt}`);
  const mcp = (app: App, token: string, body: object = { jsonrpc: '2.0', id: 1, method: 'tools/list' }) =>
    request(app).post(`/mcp?token=${token}`).set('Accept', 'application/json, text/event-stream').send(body);
  const expenseNames = async (workspaceId: string) =>
    (
      await db.admin<
        { name: string }[]
      >`SELECT name FROM public.personal_transactions WHERE workspace_id = ${workspaceId} ORDER BY name`
    ).map((r) => r.name);

  it('revoking a token stops it on the very next request on every surface and instance', async () => {
    const t = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await jwtFor(a.app, t.token);
    for (const app of [a.app, b.app]) {
      expect((await rest(app, jwt).expect(200)).body).toHaveLength(1);
      expect((await wrapper(app, jwt).expect(200)).body).toHaveLength(1);
      expect((await mcp(app, t.token).expect(200)).body.result.tools).toHaveLength(tools.length); // a write token: every tool
    }

    await revokeToken(db.admin, t.id, ws.id, 'test');

    for (const app of [b.app, a.app]) {
      const viaRest = await rest(app, jwt).expect(401);
      expect(viaRest.body).toMatchObject({
        code: 'PT401',
        message: 'The workspace token behind this access token has been revoked',
      });
      expect((await wrapper(app, jwt).expect(401)).body).toMatchObject({ code: 'PT401' });
      const viaMcp = await mcp(app, t.token).expect(401);
      expect(viaMcp.body).toMatchObject({ code: 'PGRST301', message: 'The workspace token has been revoked' });
      await exchange(app, t.token).expect(401);
      for (const res of [viaRest, viaMcp]) {
        expect(JSON.stringify(res.body)).not.toContain(jwt);
        expect(JSON.stringify(res.body)).not.toContain(t.token);
      }
    }
  });

  it('the API switch stops every token of the workspace on the next request with 403, on every surface and instance', async () => {
    const t = await tokenFor(db.admin, ws.id, 'read');
    const theirs = await tokenFor(db.admin, other.id, 'read');
    const jwt = await jwtFor(a.app, t.token);
    const theirJwt = await jwtFor(b.app, theirs.token);

    await setApiEnabled(db.admin, ws.id, false, 'test');
    try {
      for (const app of [a.app, b.app]) {
        expect((await rest(app, jwt).expect(403)).body).toMatchObject({
          code: 'PT403',
          message: 'API access is switched off for this workspace',
        });
        expect((await wrapper(app, jwt).expect(403)).body).toMatchObject({ code: 'PT403' });
        expect((await mcp(app, t.token).expect(403)).body).toMatchObject({ code: 'PT403' });
        await exchange(app, t.token).expect(403);
        // Other workspaces go on.
        await rest(app, theirJwt).expect(200);
        await wrapper(app, theirJwt).expect(200);
        await mcp(app, theirs.token).expect(200);
      }
    } finally {
      await setApiEnabled(db.admin, ws.id, true, 'test');
    }
    await rest(b.app, jwt).expect(200);
    await mcp(a.app, t.token).expect(200);
  });

  it('refuses every write of a read token on /rest/v1, /api/v1 and MCP as read-only, and the data stays as it was', async () => {
    const t = await tokenFor(db.admin, ws.id, 'read');
    const jwt = await jwtFor(a.app, t.token);
    const before = await expenseNames(ws.id);
    const writes = [
      request(a.app)
        .post('/rest/v1/personal_transactions')
        .send({ name: 'by a reader', amount: 1, category_id: 'other', method_id: 'cash' }),
      request(b.app)
        .patch(`/rest/v1/personal_transactions?id=eq.${ws.expenseId}`)
        .send({ name: 'renamed by a reader' }),
      request(a.app).delete(`/rest/v1/personal_transactions?id=eq.${ws.expenseId}`),
      request(b.app)
        .post('/api/v1/personal_transactions')
        .send({ name: 'by a reader', amount: 1, category_id: 'other', method_id: 'cash' }),
      request(a.app)
        .post('/api/v1/fund_transactions')
        .send({ fund_id: ws.fundId, name: 'by a reader', amount: 1, category_id: 'refund', method_id: 'cash' }),
    ];
    for (const write of writes) {
      const res = await write.set('apikey', TEST_API_KEY).set('Authorization', `Bearer ${jwt}`);
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: '42501', message: expect.stringMatching(/^This token is read-only/) });
    }
    const viaMcp = await mcp(b.app, t.token, {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: {
        name: 'create_expense',
        arguments: { name: 'by a reader', amount: 1, category_id: 'other', method_id: 'cash' },
      },
    }).expect(200);
    expect(viaMcp.body.result.isError).toBe(true);
    expect(viaMcp.body.result.content[0].text).toMatch(/read-only/);
    expect(await expenseNames(ws.id)).toEqual(before);
    expect(await db.admin`SELECT 1 FROM public.fund_transactions WHERE name = 'by a reader'`).toHaveLength(0);

    // The same writes with a write token go through.
    const writer = await jwtFor(b.app, (await tokenFor(db.admin, ws.id, 'write')).token);
    await request(a.app)
      .post('/rest/v1/personal_transactions')
      .set('apikey', TEST_API_KEY)
      .set('Authorization', `Bearer ${writer}`)
      .send({ name: 'by a writer', amount: 1, category_id: 'other', method_id: 'cash' })
      .expect(201);
    expect(await expenseNames(ws.id)).toEqual([...before, 'by a writer'].sort());
  });

  it('one token has one limit over the exchange, /rest/v1, /api/v1 and MCP, on both instances', async () => {
    const la = start({ TALLY_RATE_LIMIT_PER_MINUTE: '6' });
    const lb = start({ TALLY_RATE_LIMIT_PER_MINUTE: '6' });
    const t = await tokenFor(db.admin, ws.id, 'read');
    const jwt = await jwtFor(la.app, t.token); // 1
    await rest(lb.app, jwt).expect(200); // 2
    await mcp(la.app, t.token).expect(200); // 3
    await wrapper(la.app, jwt).expect(200); // 4
    await mcp(lb.app, t.token).expect(200); // 5
    await exchange(lb.app, t.token).expect(200); // 6

    const limited = await rest(la.app, jwt);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(limited.headers['ratelimit-policy']).toMatch(/"6-in-1min"; q=6; w=60/);
    expect(limited.body).toEqual({
      code: 'PT429',
      message: expect.stringContaining('Rate limit exceeded'),
      details: null,
      hint: expect.any(String),
    });
    expect((await mcp(lb.app, t.token)).status).toBe(429);
    expect((await wrapper(lb.app, jwt)).status).toBe(429);
    expect((await exchange(la.app, t.token)).status).toBe(429);

    // Another token, same workspace and address: its own budget.
    const fresh = await tokenFor(db.admin, ws.id, 'read');
    await rest(lb.app, await jwtFor(la.app, fresh.token)).expect(200);
  });

  it('counts a /rest/v1 request with a bad apikey or JWT against the client address', async () => {
    const l = start({ TALLY_RATE_LIMIT_PER_MINUTE: '2' });
    await request(l.app).get('/rest/v1/personal_transactions').set('apikey', 'wrong').expect(401);
    await request(l.app)
      .get('/rest/v1/personal_transactions')
      .set('apikey', TEST_API_KEY)
      .set('Authorization', 'Bearer x.y.z')
      .expect(401);
    const res = await request(l.app).get('/rest/v1/personal_transactions').set('apikey', TEST_API_KEY);
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
  });
});
