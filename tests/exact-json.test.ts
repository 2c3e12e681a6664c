import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { first } from './harness/present.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// A JSON body means what its text says, on every surface. A number reaches Postgres as the
// client wrote it (not through a double: 1e400 was Infinity and stored as NULL,
// 12345678901234567890.12 lost its last digits), or it is a 400 naming the field; an object with
// a key twice, and bytes that are not UTF-8, are 400s rather than a guess.

describe('exact JSON bodies', () => {
  let db: TestDatabase, t: TestApp, a: WorkspaceFixture, jwt: string, token: string;

  let server: Server;
  let base: string;

  beforeAll(async () => {
    ({ db, t, a, jwtA: jwt, tokenA: token } = await setUpFinance(restEnv()));
    server = createServer(t.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await tearDown(db, t);
  });

  // Bodies go as the bytes given, over a real socket (supertest would re-encode them).
  const send = async (path: string, method: string, body: string | Buffer, headers: Record<string, string>) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : new Uint8Array(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as { message?: string } };
  };
  const rest = (method: 'post' | 'patch', path: string, body: string | Buffer) =>
    send(`/rest/v1/${path}`, method.toUpperCase(), body, { apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` });
  const api = (method: 'post' | 'patch', path: string, body: string | Buffer) =>
    send(`/api/v1/${path}`, method.toUpperCase(), body, { Authorization: `Bearer ${jwt}` });
  const mcp = (body: string | Buffer) =>
    send(`/mcp?token=${token}`, 'POST', body, { Accept: 'application/json, text/event-stream' });
  /** MCP's answer to such a body: invalid params (-32602) of the message, in JSON-RPC, saying what is wrong. */
  const invalidParams = (message: RegExp) => ({
    jsonrpc: '2.0',
    id: 7,
    error: { code: -32602, message: expect.stringMatching(message) },
  });
  const mcpCall = (name: string, args: string) =>
    `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`;

  const target = async () =>
    first(await db.admin<{ t: string | null }[]>`SELECT target_amount::text AS t FROM funds WHERE id = ${a.fundId}`).t;
  const expenses = async (name: string) =>
    (await db.admin<{ amount: string }[]>`SELECT amount::text FROM personal_transactions WHERE name = ${name}`).map(
      (r) => r.amount,
    );
  const expense = (name: string, amount: string) =>
    `{"name":"${name}","amount":${amount},"category_id":"food-drinks","method_id":"cash"}`;

  describe('numbers out of range are a 400 naming the field, and nothing changes', () => {
    it.each([
      ['1e400', '1e400'],
      ['-1e400', '-1e400'],
      ['a 401-digit integer', '1' + '0'.repeat(400)],
      ['12345678901234567890.12', '12345678901234567890.12'],
    ])('/rest/v1 PATCH target_amount %s', async (_label, n) => {
      const before = await target();
      const res = await rest('patch', `funds?id=eq.${a.fundId}`, `{"target_amount":${n}}`);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/target_amount/);
      expect(await target()).toBe(before);
    });

    it('/api/v1 and MCP refuse them too, naming the field', async () => {
      const before = await target();
      const viaApi = await api('patch', `funds/${a.fundId}`, '{"target_amount":1e400}');
      expect(viaApi.status).toBe(400);
      expect(viaApi.body.message).toMatch(/target_amount/);
      const viaMcp = await mcp(mcpCall('update_fund', `{"id":"${a.fundId}","target_amount":1e400}`));
      expect(viaMcp.status).toBe(400);
      expect(viaMcp.body).toEqual(invalidParams(/params\.arguments\.target_amount/));
      expect(await target()).toBe(before);
    });
  });

  describe('a number reaches the database as written', () => {
    // 999999999999.9997 is not a double: JSON.parse makes it 999999999999.9998.
    it('/rest/v1 and /api/v1 store 999999999999.9997 exactly', async () => {
      expect((await rest('post', 'personal_transactions', expense('exact rest', '999999999999.9997'))).status).toBe(
        201,
      );
      expect((await api('post', 'personal_transactions', expense('exact api', '999999999999.9997'))).status).toBe(201);
      expect(await expenses('exact rest')).toEqual(['999999999999.9997']);
      expect(await expenses('exact api')).toEqual(['999999999999.9997']);
    });

    it('MCP refuses a number it cannot hold exactly, naming where it is', async () => {
      const res = await mcp(mcpCall('create_expense', expense('exact mcp', '999999999999.9997')));
      expect(res.status).toBe(400);
      expect(res.body).toEqual(invalidParams(/params\.arguments\.amount/));
      expect(await expenses('exact mcp')).toEqual([]);
    });

    it('1.00000000000000001 has more decimals than an amount may: a 400, not 1', async () => {
      const viaRest = await rest('post', 'personal_transactions', expense('too precise', '1.00000000000000001'));
      expect(viaRest.status).toBe(400);
      expect(viaRest.body.message).toMatch(/amount/);
      const viaApi = await api('post', 'personal_transactions', expense('too precise', '1.00000000000000001'));
      expect(viaApi.status).toBe(400);
      expect(viaApi.body.message).toMatch(/amount/);
      const viaMcp = await mcp(mcpCall('create_expense', expense('too precise', '1.00000000000000001')));
      expect(viaMcp.status).toBe(400);
      expect(viaMcp.body).toEqual(invalidParams(/amount/));
      expect(await expenses('too precise')).toEqual([]);
    });
  });

  describe('a key given twice is a 400 on every surface', () => {
    const twice = '{"name":"twice","amount":1,"amount":5000,"category_id":"food-drinks","method_id":"cash"}';
    it('MCP, as invalid params of the message', async () => {
      const res = await mcp(mcpCall('create_expenses', `{"expenses":[${twice}]}`));
      expect(res.status).toBe(400);
      expect(res.body).toEqual(invalidParams(/amount is given twice/));
      expect(await expenses('twice')).toEqual([]);
    });
    it.each([
      ['/rest/v1', () => rest('post', 'personal_transactions', twice)],
      ['/api/v1', () => api('post', 'personal_transactions', twice)],
    ])('%s', async (_surface, send) => {
      const res = await send();
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        code: 'PGRST102',
        message: expect.stringMatching(/amount is given twice/),
        details: null,
        hint: expect.any(String),
      });
      expect(await expenses('twice')).toEqual([]);
    });

    it('also when one of the two is written with an escape', async () => {
      const res = await rest(
        'post',
        'personal_transactions',
        expense('escaped', '1').replace('}', ',"\\u0061mount":2}'),
      );
      expect(res.status).toBe(400);
      expect(await expenses('escaped')).toEqual([]);
    });
  });

  describe('bytes that are not UTF-8 are a 400 on every surface', () => {
    const bytes = (json: string) => {
      const [head, tail] = json.split('\u00ff');
      return Buffer.concat([Buffer.from(head!), Buffer.from([0xff, 0xfe]), Buffer.from(tail!)]);
    };
    const body = bytes(expense('bad \u00ff bytes', '1'));
    it('MCP, as a JSON-RPC parse error', async () => {
      const res = await mcp(bytes(mcpCall('create_expense', expense('bad \u00ff bytes', '1'))));
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32700, message: 'Parse error: Invalid request body: the body is not valid UTF-8 text' },
      });
    });
    it.each([
      ['/rest/v1', () => rest('post', 'personal_transactions', body)],
      ['/api/v1', () => api('post', 'personal_transactions', body)],
    ])('%s', async (_surface, send) => {
      const res = await send();
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        code: 'PGRST102',
        message: 'Invalid request body: the body is not valid UTF-8 text',
        details: null,
        hint: null,
      });
      const stored = await db.admin`SELECT 1 FROM personal_transactions WHERE name LIKE 'bad %'`;
      expect(stored).toHaveLength(0);
    });

    it('also in a chunked body', async () => {
      const res = await fetch(`${base}/rest/v1/personal_transactions`, {
        method: 'POST',
        headers: { apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
        body: new Blob([body]).stream(),
        duplex: 'half',
      } as RequestInit);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toBe(
        'Invalid request body: the body is not valid UTF-8 text',
      );
    });
  });
});
