import { jest } from '@jest/globals';
import express from 'express';
import request from 'supertest';
import { log } from '../gateway/engine/log.js';
import type { GatewayCall } from '../gateway/engine/call.js';
import { exchangeOf, serve } from '../gateway/http.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import { requestLines } from './harness/log.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';
import { waitFor } from './harness/wait.js';
import { newWorkspaceToken } from '../gateway/secrets.js';
import { FAILED_AUTH_LIMIT_PER_MINUTE } from '../gateway/auth/ratelimit.js';

// Every request goes through one request shell (gateway/http.ts serve), whichever surface
// answers it: the plain node:http handlers (/rest/v1, /api/v1 with its token exchange, /mcp, the
// OpenAPI document at /openapi.json) and the Express routers (the settings pages, health). These hold each
// cross-cutting concern to every surface: the request log line, Server-Timing, the body limit,
// a malformed path, and the client address behind a trusted proxy.

const BOTH = 'application/json, text/event-stream';
const BIG = 'x'.repeat(20_000); // over TALLY_MAX_BODY_BYTES below, and over the settings forms' 16 kB

describe('the request shell, on every surface', () => {
  let db: TestDatabase, t: TestApp, jwtA: string, tokenA: string;

  beforeAll(async () => {
    ({ db, t, jwtA, tokenA } = await setUpFinance(
      restEnv({ TALLY_MAX_BODY_BYTES: '2048', TALLY_TRUST_PROXY: 'true', TALLY_RATE_LIMIT_PER_MINUTE: '1000' }),
    ));
  });
  afterAll(() => tearDown(db, t));

  /** One request of each surface, answered without error. */
  const SURFACES: [string, () => request.Test][] = [
    ['/rest/v1', () => request(t.app).get('/rest/v1/contacts?select=id').set('apikey', TEST_API_KEY).set(bearer())],
    ['/api/v1', () => request(t.app).get('/api/v1/contacts?select=id').set(bearer())],
    [
      '/mcp',
      () =>
        request(t.app)
          .post(`/mcp?token=${tokenA}`)
          .set({ Accept: BOTH, 'Content-Type': 'application/json' })
          .send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_funds', arguments: {} } }),
    ],
    ['exchange', () => request(t.app).post('/api/v1/token').set('Authorization', `Bearer ${tokenA}`)],
    ['settings', () => request(t.app).get('/settings/login')],
    ['health', () => request(t.app).get('/healthz')],
    ['openapi', () => request(t.app).get('/openapi.json')],
  ];
  const bearer = () => ({ Authorization: `Bearer ${jwtA}` });

  it('logs one request line with the same fields on every surface, its route without the query', async () => {
    const info = jest.spyOn(log, 'info');
    try {
      for (const [name, send] of SURFACES) {
        info.mockClear();
        const res = await send();
        expect([name, res.status < 400]).toEqual([name, true]);
        await waitFor(() => requestLines(info).length > 0, `the request line of ${name}`);
        const [line] = requestLines(info);
        expect([name, Object.keys(line!).sort()]).toEqual([
          name,
          ['db_ms', 'duration_ms', 'method', 'route', 'status', 'workspace_id'],
        ]);
        expect([name, line!.route!.includes('?')]).toEqual([name, false]);
        expect([name, line!.status]).toEqual([name, res.status]);
      }
    } finally {
      info.mockRestore();
    }
  });

  it('finds a surface whatever the case of its path, as Express mounts do', async () => {
    const rest = await request(t.app).get('/REST/V1/contacts?select=id').set('apikey', TEST_API_KEY).set(bearer());
    expect([rest.status, Array.isArray(rest.body)]).toEqual([200, true]);
    const api = await request(t.app).get('/Api/V1/contacts?select=id').set(bearer());
    expect([api.status, Array.isArray(api.body.data ?? api.body)]).toEqual([200, true]);
    expect((await request(t.app).get('/HEALTHZ')).status).toBe(200);
    // A prefix is a whole segment: /rest/v1x is no path of /rest/v1.
    expect((await request(t.app).get('/rest/v1x/contacts').set('apikey', TEST_API_KEY)).status).toBe(404);
  });

  it('sends Server-Timing on every surface whose request ran a database transaction', async () => {
    for (const [name, send] of SURFACES.slice(0, 3)) {
      const res = await send();
      expect([name, res.headers['server-timing']]).toEqual([
        name,
        expect.stringMatching(/^pool;dur=[\d.]+, db;dur=[\d.]+$/),
      ]);
    }
  });

  it('sends Server-Timing on an Express answer too, from the gateway calls of its Exchange', async () => {
    const gateway: GatewayCall = () =>
      Promise.resolve({ status: 200, headers: {}, body: '[]', timing: { poolMs: 1.5, dbMs: 2.25 } });
    const app = express();
    app.get('/x', async (req, res) => {
      const x = exchangeOf(req);
      await x.call({ method: 'GET', relation: 'r', query: new URLSearchParams(), headers: {} }, {
        role: 'anon',
        claims: {},
      } as never);
      res.json({ ok: true });
    });
    const res = await request(serve(gateway, false, (x) => app(x.req, x.res))).get('/x');
    expect([res.status, res.headers['server-timing']]).toEqual([200, 'pool;dur=1.50, db;dur=2.25']);
  });

  it('answers a body over its limit with the one 413 on every surface that reads one', async () => {
    const posts: [string, () => request.Test][] = [
      ['/rest/v1', () => request(t.app).post('/rest/v1/contacts').set('apikey', TEST_API_KEY).set(bearer())],
      ['/api/v1', () => request(t.app).post('/api/v1/contacts').set(bearer())],
      ['/mcp', () => request(t.app).post(`/mcp?token=${tokenA}`).set('Accept', BOTH)],
      ['exchange', () => request(t.app).post('/api/v1/token')],
    ];
    // /mcp says it as a JSON-RPC error, which an MCP host shows its agent.
    const codeOf = (name: string, body: { code?: string; error?: { code: number } }) =>
      name === '/mcp' ? body.error?.code : body.code;
    for (const [name, post] of posts) {
      const expected = [name, 413, name === '/mcp' ? -32000 : 'TLY001'];
      const res = await post()
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ name: BIG }));
      expect([name, res.status, codeOf(name, res.body)]).toEqual(expected);
      // In a charset other than UTF-8: the other way through the reader, the same answer.
      const latin1 = await post()
        .set('Content-Type', 'application/json; charset=iso-8859-1')
        .send(JSON.stringify({ name: BIG }));
      expect([name, latin1.status, codeOf(name, latin1.body)]).toEqual(expected);
    }
    // The settings pages answer their errors as pages, with the same status.
    const form = await request(t.app).post('/settings/login').type('form').send({ email: BIG, password: BIG });
    expect(form.status).toBe(413);
  });

  it('answers a malformed percent-escape in the path with the one 400 on every surface', async () => {
    for (const path of ['/rest/v1/%zz', '/api/v1/%zz', '/mcp/%zz', '/api/v1/token%zz', '/settings/%zz', '/%zz']) {
      const res = await request(t.app).get(path).set('apikey', TEST_API_KEY);
      expect([path, res.status, res.body]).toEqual([
        path,
        400,
        {
          code: 'PGRST100',
          message: 'Invalid percent-encoding in the request path',
          details: null,
          hint: expect.any(String),
        },
      ]);
    }
  });

  it('takes the client address from the trusted proxy on every surface, one address for all of them', async () => {
    // The request limit per address (no token): one count across three surfaces, two of them Express.
    const anonymous: [string, (address: string) => request.Test][] = [
      ['/rest/v1', (ip) => request(t.app).get('/rest/v1/').set('apikey', TEST_API_KEY).set('X-Forwarded-For', ip)],
      ['/api/v1', (ip) => request(t.app).get('/api/v1/openapi.json').set('X-Forwarded-For', ip)],
      ['/openapi.json', (ip) => request(t.app).get('/openapi.json').set('X-Forwarded-For', ip)],
    ];
    const left = (res: request.Response) => Number(/r=(\d+)/.exec(res.headers['ratelimit'] ?? '')?.[1]);
    const counts = async (address: string) => {
      const remaining: number[] = [];
      for (const [name, send] of anonymous) {
        const res = await send(address);
        expect([name, res.status]).toEqual([name, 200]);
        remaining.push(left(res));
      }
      return remaining;
    };
    const first = await counts('203.0.113.7');
    expect(first).toEqual([first[0], first[0]! - 1, first[0]! - 2]);
    expect(await counts('203.0.113.8')).toEqual(first); // a count of its own

    // The failed-authentication limit per address: /mcp and the exchange (Express) count together.
    const badMcp = (ip: string) =>
      request(t.app)
        .post(`/mcp?token=${newWorkspaceToken()}`)
        .set({ Accept: BOTH, 'Content-Type': 'application/json', 'X-Forwarded-For': ip })
        .send({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const badExchange = (ip: string) =>
      request(t.app)
        .post('/api/v1/token')
        .set({ Authorization: `Bearer ${newWorkspaceToken()}`, 'X-Forwarded-For': ip });
    for (let i = 0; i < FAILED_AUTH_LIMIT_PER_MINUTE / 2; i++) {
      expect((await badMcp('198.51.100.1')).status).toBe(401);
      expect((await badExchange('198.51.100.1')).status).toBe(401);
    }
    expect((await badMcp('198.51.100.1')).status).toBe(429);
    expect((await badExchange('198.51.100.1')).status).toBe(429);
    expect((await badMcp('198.51.100.2')).status).toBe(401);
  });
});
