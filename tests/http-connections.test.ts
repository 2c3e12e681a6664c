import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import postgres from 'postgres';
import { listen } from '../gateway/server.js';
import { startTestApp, type TestApp } from './harness/app.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown, type FinanceSuite } from './harness/suite.js';
import { waitFor } from './harness/wait.js';

// What one client address may hold of the server: idle connections from one address reached
// the process's file-descriptor limit and locked everyone out, a header sent a byte at a time
// kept its connection 79 s, and a body (also /mcp's, before authentication) 319 s. Now one
// address holds at most TALLY_HTTP_CONNECTIONS_PER_ADDRESS connections (a 429 beyond), a
// request's headers must arrive within TALLY_HTTP_HEADERS_TIMEOUT_MS and the whole request
// within TALLY_HTTP_REQUEST_TIMEOUT_MS (408, connection closed), and a slow but honest client
// within them is served. Only 127.0.0.1, with bounded loops.

const PER_ADDRESS = 20;
const PIPELINE_DEPTH = 2;
const LOCK_KEY = 4343;

let s: FinanceSuite;
let server: Server;
let port: number;

beforeAll(async () => {
  s = await setUpFinance(
    restEnv({
      TALLY_HTTP_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      TALLY_HTTP_HEADERS_TIMEOUT_MS: '2000',
      TALLY_HTTP_REQUEST_TIMEOUT_MS: '5000',
      TALLY_HTTP_PIPELINE_DEPTH: String(PIPELINE_DEPTH),
      TALLY_DB_POOL: '10',
      TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: '60000',
    }),
  );
  server = await listen(s.t.app, 0, '127.0.0.1', s.t.ctx.config);
  port = (server.address() as AddressInfo).port;
  await s.db.admin.unsafe(`
    CREATE FUNCTION public.wait_for_release() RETURNS int LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_catalog.pg_advisory_xact_lock_shared(${LOCK_KEY});
      RETURN 1;
    END $$;
    -- An answer larger than the kernel's socket buffers hold (a few MB): the rest waits in the server.
    CREATE FUNCTION public.big_answer() RETURNS text LANGUAGE sql AS $$ SELECT repeat('x', 32000000) $$;
    CREATE FUNCTION public.big_answer_after_release() RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_catalog.pg_advisory_xact_lock_shared(${LOCK_KEY});
      RETURN repeat('x', 32000000);
    END $$;
    GRANT EXECUTE ON FUNCTION public.wait_for_release(), public.big_answer(), public.big_answer_after_release()
      TO api_read;`);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await tearDown(s.db, s.t);
});

interface Client {
  socket: Socket;
  /** Everything the server sent. */
  received: () => string;
  closed: () => boolean;
}

async function open(to = port): Promise<Client> {
  const socket = connect(to, '127.0.0.1');
  let text = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, received: () => text, closed: () => closed };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const connections = () => new Promise<number>((resolve) => server.getConnections((_err, n) => resolve(n)));

describe('connections of one address', () => {
  test(`one address holds at most ${PER_ADDRESS} open connections; beyond, a 429 and closed; freed, served again`, async () => {
    const held: Client[] = [];
    try {
      for (let i = 0; i < PER_ADDRESS; i++) held.push(await open());
      await waitFor(async () => (await connections()) === PER_ADDRESS, 'the server to hold every connection');
      const over = await Promise.all(Array.from({ length: 5 }, open));
      for (const c of over) await waitFor(() => c.closed(), 'a connection over the limit to be closed');
      for (const c of over) {
        expect(c.received()).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
        expect(JSON.parse(c.received().split('\r\n\r\n')[1] ?? '')).toMatchObject({ code: 'PT429' });
      }
      expect(held.some((c) => c.closed())).toBe(false);
    } finally {
      for (const c of held) c.socket.destroy();
    }
    await waitFor(async () => (await connections()) === 0, 'the held connections to close');
    const again = await open();
    again.socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    await waitFor(() => again.closed(), 'the answer');
    expect(again.received()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });
});

describe('slow requests', () => {
  test('a request whose headers never end is answered 408 and closed', async () => {
    const c = await open();
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: a');
    await waitFor(() => c.closed(), 'the server to close a connection whose headers never end', 20_000);
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  test('a connection that sends nothing is closed', async () => {
    const c = await open();
    await waitFor(() => c.closed(), 'the server to close a connection that sends nothing', 20_000);
  });

  test('a body to /mcp that never ends, before authentication, is answered 408 and closed', async () => {
    const c = await open();
    c.socket.write(
      'POST /mcp?token=x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":',
    );
    await waitFor(() => c.closed(), 'the server to close a connection whose body never ends', 20_000);
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  test('a slow but honest client, within the timeouts, is served', async () => {
    const body = JSON.stringify({ name: 'slow client', phone: '+44 20 7946 0958' });
    const head =
      `POST /rest/v1/contacts HTTP/1.1\r\nHost: localhost\r\napikey: ${TEST_API_KEY}\r\n` +
      `Authorization: Bearer ${s.jwtA}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
    const c = await open();
    // Headers in 5 pieces over about half a second, then the body in 5 pieces over another.
    for (const text of [head, body]) {
      const step = Math.ceil(text.length / 5);
      for (let i = 0; i < text.length; i += step) {
        c.socket.write(text.slice(i, i + step));
        await pause(100);
      }
    }
    await waitFor(() => c.closed(), 'the answer');
    expect(c.received()).toMatch(/^HTTP\/1\.1 201 Created\r\n/);
  });
});

/** The HTTP answers in what a client received: each one's status. */
const statusesIn = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

describe('requests pipelined on one connection', () => {
  // 500 pipelined /readyz every half second on one socket each started their work at once, and
  // another workspace's reads waited 25-30 s. The requests here wait for a lock the test holds.
  test(`at most ${PIPELINE_DEPTH} are worked on at once; the next is answered 429 and the connection closed`, async () => {
    const owner = postgres(s.db.url, { max: 1, onnotice: () => {} });
    await owner`SELECT pg_catalog.pg_advisory_lock(${LOCK_KEY})`;
    const ask =
      `GET /rest/v1/rpc/wait_for_release HTTP/1.1\r\nHost: localhost\r\napikey: ${TEST_API_KEY}\r\n` +
      `Authorization: Bearer ${s.readA}\r\n\r\n`;
    const c = await open();
    // Requests the server works on: holding a pooled connection, or waiting for one.
    let most = 0;
    const working = () => {
      const { size, free, waiting } = s.t.ctx.db.stats();
      most = Math.max(most, size - free + waiting);
      return size - free + waiting;
    };
    try {
      c.socket.write(ask.repeat(6));
      await waitFor(() => working() >= PIPELINE_DEPTH, 'the first requests to wait for the lock');
      // The six arrived together: had the others been taken in, they would be working by now.
      for (let i = 0; i < 20; i++) {
        working();
        await pause(10);
      }
    } finally {
      await owner.end();
    }
    await waitFor(() => c.closed(), 'the server to close the connection after its 429');
    expect(statusesIn(c.received())).toEqual([200, 200, 429]);
    expect(c.received()).toMatch(/Connection: close\r\n[\s\S]*"code":"PT429"/);
    // Only the first two ever reached the database (all six did, each holding or awaiting a connection).
    expect(most).toBe(PIPELINE_DEPTH);
  });
});

describe('answers a client does not take', () => {
  // A client that read nothing kept each large answer in the server's memory for as long as it
  // liked: 40 such connections took the process from 348 MB to 1.4 GB. Now an answer has
  // TALLY_HTTP_SEND_TIMEOUT_MS to be taken, and an address at most
  // TALLY_HTTP_SEND_BYTES_PER_ADDRESS bytes waiting to be sent.
  const BIG = '/rest/v1/rpc/big_answer';
  const askBig = `GET ${BIG} HTTP/1.1\r\nHost: localhost\r\napikey: ${TEST_API_KEY}\r\nAuthorization: Bearer `;
  let t: TestApp;
  let tServer: Server;
  const start = async (env: Record<string, string>) => {
    t = startTestApp(s.db.url, restEnv({ TALLY_DB_MAX_RESPONSE_BYTES: String(128 * 1024 * 1024), ...env }));
    tServer = await listen(t.app, 0, '127.0.0.1', t.ctx.config);
    return (tServer.address() as AddressInfo).port;
  };
  afterEach(async () => {
    tServer.closeAllConnections();
    await new Promise((r) => tServer.close(r));
    await t.close();
  });

  /** A client that asks for the large answer, reads its first bytes, then reads nothing more. */
  async function stalled(to: number): Promise<Client> {
    const c = await open(to);
    c.socket.once('data', () => c.socket.pause());
    c.socket.write(`${askBig}${s.readA}\r\n\r\n`);
    await waitFor(() => c.received().startsWith('HTTP/1.1 200'), 'the large answer to start');
    return c;
  }

  /** A client that reads the large answer whole (or its refusal): the status and the body's length. */
  const fetchBig = async (to: number) => {
    const res = await fetch(`http://127.0.0.1:${to}${BIG}`, {
      headers: { apikey: TEST_API_KEY, authorization: `Bearer ${s.readA}` },
    });
    return { status: res.status, text: await res.text() };
  };

  test('is dropped after the send deadline: the connection closed and the answer freed', async () => {
    const to = await start({
      TALLY_HTTP_SEND_TIMEOUT_MS: '1000',
      TALLY_HTTP_SEND_BYTES_PER_ADDRESS: String(40 * 1024 * 1024),
    });
    await stalled(to);
    // The client reads nothing, so only the server sees its end of the connection go.
    const open = () => new Promise<number>((resolve) => tServer.getConnections((_err, n) => resolve(n)));
    await waitFor(
      async () => (await open()) === 0,
      'the server to close the connection of an answer not taken',
      30_000,
    );
    // Its 32 MB no longer count against the address: another large answer fits in 40 MiB (its
    // status is enough: whole, it would have to be read within the deadline of a second).
    const again = await fetch(`http://127.0.0.1:${to}${BIG}`, {
      headers: { apikey: TEST_API_KEY, authorization: `Bearer ${s.readA}` },
    });
    expect(again.status).toBe(200);
    await again.body?.cancel();
  });

  test('counts against its address: a second large answer waits for room (429), a small one is served', async () => {
    const to = await start({ TALLY_HTTP_SEND_BYTES_PER_ADDRESS: String(40 * 1024 * 1024) });
    const c = await stalled(to);
    const refused = await fetchBig(to);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text)).toMatchObject({
      code: 'PT429',
      message: expect.stringContaining('not yet taken by this client address'),
    });
    const small = await fetch(`http://127.0.0.1:${to}/rest/v1/categories?select=id&limit=1`, {
      headers: { apikey: TEST_API_KEY, authorization: `Bearer ${s.readA}` },
    });
    expect(small.status).toBe(200);
    await small.arrayBuffer();
    // The client goes away: its answer's bytes with it.
    c.socket.destroy();
    await waitFor(async () => (await fetchBig(to)).status === 200, 'room for a large answer again');
  });

  /** Requests the server works on: holding a pooled connection, or waiting for one. */
  const working = () => {
    const { size, free, waiting } = t.ctx.db.stats();
    return size - free + waiting;
  };

  /** Runs `leave` while the test holds the lock the slow requests wait for, then lets them finish. */
  async function whileHeld(to: number, leave: (c: Client) => Promise<void>): Promise<void> {
    const owner = postgres(s.db.url, { max: 1, onnotice: () => {} });
    await owner`SELECT pg_catalog.pg_advisory_lock(${LOCK_KEY})`;
    try {
      const c = await open(to);
      await leave(c);
    } finally {
      await owner.end();
    }
    await waitFor(() => working() === 0, 'the abandoned requests to finish');
  }

  test('made after its client went, counts nothing against the address', async () => {
    // The answer is made once the client has gone: its 32 MB were counted and never let go of,
    // so the address was refused every answer after (429) until the server restarted.
    const to = await start({ TALLY_HTTP_SEND_BYTES_PER_ADDRESS: String(40 * 1024 * 1024) });
    await whileHeld(to, async (c) => {
      c.socket.write(
        `GET /rest/v1/rpc/big_answer_after_release HTTP/1.1\r\nHost: localhost\r\napikey: ${TEST_API_KEY}\r\nAuthorization: Bearer ${s.readA}\r\n\r\n`,
      );
      await waitFor(() => working() >= 1, 'the request to wait for the lock');
      c.socket.destroy();
    });
    expect((await fetchBig(to)).status).toBe(200);
  });

  test('pipelined behind another whose client went, counts nothing against the address', async () => {
    // The second answer waits for the first to be sent; the connection goes first: both
    // responses close with it, the second's 32 MB let go of too.
    const to = await start({ TALLY_HTTP_SEND_BYTES_PER_ADDRESS: String(40 * 1024 * 1024) });
    await whileHeld(to, async (c) => {
      const ask = (path: string) =>
        `GET ${path} HTTP/1.1\r\nHost: localhost\r\napikey: ${TEST_API_KEY}\r\nAuthorization: Bearer ${s.readA}\r\n\r\n`;
      c.socket.write(ask('/rest/v1/rpc/wait_for_release') + ask(BIG));
      // Both taken in: the first waits for the lock, the second's answer is made and waits for it.
      await waitFor(() => working() === 1, 'the first request to wait for the lock');
      // Another large answer to the address is refused while the second's 32 MB are counted.
      await waitFor(async () => (await fetchBig(to)).status === 429, 'the second answer to be counted');
      c.socket.destroy();
    });
    expect((await fetchBig(to)).status).toBe(200);
  });
});
