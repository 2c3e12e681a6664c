import { jest } from '@jest/globals';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { log } from '../gateway/log.js';
import { listen } from '../gateway/server.js';
import { waitFor } from './harness/wait.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';

// Bad input is a 4xx in the one error shape, never a 500; and errors name nothing the caller's
// role may not read.

let s: FinanceSuite;

beforeAll(async () => {
  s = await setUpFinance(restEnv());
});
afterAll(() => tearDown(s.db, s.t));

const shape = (body: unknown) =>
  expect(Object.keys(body as object).sort()).toEqual(['code', 'details', 'hint', 'message']);

describe('a malformed percent-escape in the path', () => {
  it.each(['/rest/v1/%zz', '/rest/v1/personal_transactions%E0%A4%A', '/api/v1/contacts/%zz', '/settings/static/%zz'])(
    '%s is a 400',
    async (path) => {
      const res = await request(s.t.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${s.jwtA}`);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('PGRST100');
      shape(res.body);
    },
  );
});

describe('a body that cannot be read as sent', () => {
  // Every surface that reads a body, with what it needs to get as far as reading it.
  const surfaces = (): [string, string, Record<string, string>][] => [
    ['/rest/v1/contacts', '{"name":"x","phone":"1"}', { apikey: TEST_API_KEY, authorization: `Bearer ${s.jwtA}` }],
    ['/api/v1/contacts', '{"name":"x","phone":"1"}', { authorization: `Bearer ${s.jwtA}` }],
    ['/api/v1/token', '{}', { authorization: `Bearer ${s.tokenA}` }],
    [
      `/mcp?token=${s.tokenA}`,
      '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      { accept: 'application/json, text/event-stream' },
    ],
  ];
  const contacts = async () => Number((await s.db.admin`SELECT count(*)::int AS n FROM public.contacts`)[0]!.n);

  /** Each surface's answer to its body sent as JSON in this Content-Encoding (which it is not). */
  const answersIn = async (encoding: string) => {
    const answers: { path: string; res: request.Response }[] = [];
    for (const [path, body, headers] of surfaces()) {
      const res = await request(s.t.app)
        .post(path)
        .set(headers)
        .set('content-type', 'application/json')
        .set('content-encoding', encoding)
        .send(body);
      answers.push({ path, res });
    }
    return answers;
  };

  it('a Content-Encoding the server does not decode is a 415 naming the ones it does (on /mcp a JSON-RPC error), and nothing is written', async () => {
    const before = await contacts();
    for (const { path, res } of await answersIn('zstd-of-my-own')) {
      expect(`${path} ${res.status}`).toBe(`${path} 415`);
      expect(res.headers['accept-encoding']).toBe('gzip, deflate, br, identity');
      if (path.startsWith('/mcp')) {
        expect(res.body).toEqual({
          jsonrpc: '2.0',
          id: null,
          error: {
            code: -32000,
            message:
              'The request body is in a Content-Encoding or charset the server does not decode. Send the body as UTF-8, compressed with gzip, deflate or br or not at all.',
          },
        });
        continue;
      }
      expect(res.body.code).toBe('TLY002');
      shape(res.body);
    }
    expect(await contacts()).toBe(before);
  });

  it('a gzip body that is not gzip is a 400 (PGRST102; on /mcp a JSON-RPC parse error), and nothing is written', async () => {
    const before = await contacts();
    for (const { path, res } of await answersIn('gzip')) {
      expect(`${path} ${res.status}`).toBe(`${path} 400`);
      if (path.startsWith('/mcp')) {
        // What an MCP host shows its agent: a JSON-RPC error, not a REST body.
        expect(res.body).toEqual({
          jsonrpc: '2.0',
          id: null,
          error: { code: -32700, message: expect.stringMatching(/^Parse error: /) },
        });
        continue;
      }
      expect(res.body.code).toBe('PGRST102');
      shape(res.body);
    }
    expect(await contacts()).toBe(before);
  });

  it('a body in a charset the server does not read is a 415', async () => {
    const res = await request(s.t.app)
      .post('/api/v1/token')
      .set('authorization', `Bearer ${s.tokenA}`)
      .set('content-type', 'application/json; charset=klingon')
      .send('{}');
    expect(res.status).toBe(415);
    expect(res.body.code).toBe('TLY002');
    shape(res.body);
  });

  it('a gzip body that is gzip is read', async () => {
    const res = await request(s.t.app)
      .post('/rest/v1/contacts')
      .set({ apikey: TEST_API_KEY, authorization: `Bearer ${s.jwtA}`, prefer: 'return=representation' })
      .set('content-type', 'application/json')
      .set('content-encoding', 'gzip')
      .serialize((zipped: Buffer) => zipped as unknown as string) // the bytes as they are, not as JSON
      .send(gzipSync('{"name":"zipped","phone":"+44 20 7946 0958"}'));
    expect(res.status).toBe(201);
    expect(res.body).toEqual([expect.objectContaining({ name: 'zipped' })]);
  });

  // A body of a declared length in UTF-8 is read without body-parser (body.ts plainBody); one
  // sent in chunks goes through body-parser. Both read it alike.
  it('a body that starts with a UTF-8 byte-order mark is read without it, sized or chunked', async () => {
    const server = await listen(s.t.app, 0, '127.0.0.1', s.t.ctx.config);
    try {
      const { port } = server.address() as AddressInfo;
      for (const [name, chunked] of [
        ['bom-sized', false],
        ['bom-chunked', true],
      ] as const) {
        const body = Buffer.from(`\uFEFF{"name":"${name}","phone":"+44 20 7946 0958"}`, 'utf8');
        const status = await new Promise<number>((resolve, reject) => {
          const req = httpRequest(
            {
              port,
              host: '127.0.0.1',
              method: 'POST',
              path: '/rest/v1/contacts',
              headers: {
                apikey: TEST_API_KEY,
                authorization: `Bearer ${s.jwtA}`,
                'content-type': 'application/json',
                ...(chunked ? {} : { 'content-length': String(body.length) }),
              },
            },
            (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            },
          );
          req.on('error', reject);
          if (chunked) req.write(body.subarray(0, 5)); // no Content-Length: node sends it chunked
          req.end(chunked ? body.subarray(5) : body);
        });
        expect(`${name} ${status}`).toBe(`${name} 201`);
        const [row] = await s.db.admin`SELECT count(*)::int AS n FROM public.contacts WHERE name = ${name}`;
        expect(row!.n).toBe(1);
      }
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('a client that stops before the end of its Content-Length gets nothing written, and the server serves on', async () => {
    const before = await contacts();
    // The server's requests, to see when this one is reading its body and when it is answered.
    const seen: { req: IncomingMessage; res: ServerResponse }[] = [];
    const server = createServer((req, res) => {
      seen.push({ req, res });
      s.t.app(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const errors = jest.spyOn(log, 'error');
    try {
      const { port } = server.address() as AddressInfo;
      const socket = connect(port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      const part = '{"name":"cut-short","pho';
      socket.write(
        'POST /rest/v1/contacts HTTP/1.1\r\nHost: x\r\n' +
          `apikey: ${TEST_API_KEY}\r\nauthorization: Bearer ${s.jwtA}\r\n` +
          `content-type: application/json\r\ncontent-length: ${part.length + 40}\r\n\r\n${part}`,
      );
      await waitFor(() => seen[0]?.req.listenerCount('data') === 1, 'the server to read the body');
      socket.destroy();
      await waitFor(() => seen[0]!.res.writableEnded, 'the request to be answered, not left waiting');
      expect(seen[0]!.res.statusCode).toBe(400); // the client's doing (PGRST102), not a 500 or a 503
      const res = await request(server)
        .get('/rest/v1/contacts?select=id&limit=1')
        .set({
          apikey: TEST_API_KEY,
          authorization: `Bearer ${s.jwtA}`,
        });
      expect(res.status).toBe(200);
      expect(await contacts()).toBe(before);
      expect(errors).not.toHaveBeenCalled(); // no 500: the request was the client's to finish
    } finally {
      errors.mockRestore();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('a request beyond what Postgres can take', () => {
  it('a select wider than Postgres allows (54011) is a 400', async () => {
    const select = Array.from({ length: 1700 }, (_, i) => `c${i}:id`).join(',');
    const res = await request(s.t.app)
      .get(`/rest/v1/personal_transactions?select=${select}`)
      .set('apikey', TEST_API_KEY)
      .set('authorization', `Bearer ${s.jwtA}`);
    expect(res.status).toBe(400);
    shape(res.body);
  });

  it('a JSON body nested thousands deep is a 400', async () => {
    const body = '['.repeat(5000) + ']'.repeat(5000);
    const res = await request(s.t.app)
      .post('/rest/v1/contacts')
      .set('apikey', TEST_API_KEY)
      .set('authorization', `Bearer ${s.jwtA}`)
      .set('content-type', 'application/json')
      .send(`{"name":"deep","phone":"1","notes":${body}}`);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    shape(res.body);
    const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    const res2 = await request(s.t.app)
      .post('/rest/v1/rpc/nothing')
      .set('apikey', TEST_API_KEY)
      .set('authorization', `Bearer ${s.jwtA}`)
      .set('content-type', 'application/json')
      .send(deep);
    expect(res2.status).toBe(400);
    shape(res2.body);
  });
});

describe('errors name only what the role may read', () => {
  it('the "column does not exist" hint of an ungranted table lists none of its columns', async () => {
    for (const path of [
      '/rest/v1/user_credentials?select=x',
      '/rest/v1/api_tokens?zzz=eq.1',
      '/rest/v1/user_credentials?select=id,x',
    ]) {
      const res = await request(s.t.app).get(path).set('apikey', TEST_API_KEY);
      const text = JSON.stringify(res.body);
      expect(`${path} ${text}`).not.toMatch(/password_hash|token_hash/);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
  });

  it('relationships to a table the role may not read are neither embedded nor listed (PGRST200, no constraint names)', async () => {
    for (const [path, asked] of [
      ['/rest/v1/contacts?select=id,workspaces(id)', 'workspaces'],
      ['/rest/v1/personal_transactions?select=id,user_credentials(id)', 'user_credentials'],
    ] as const) {
      const res = await request(s.t.app).get(path).set('apikey', TEST_API_KEY).set('authorization', `Bearer ${s.jwtA}`);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('PGRST200');
      const text = JSON.stringify(res.body).replaceAll(asked, '');
      expect(text).not.toMatch(
        /_fkey|workspaces|api_tokens|user_credentials|workspace_members|billing_accounts|password/,
      );
    }
  });
});
