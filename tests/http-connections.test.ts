import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { listen } from '../gateway/server.js';
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

let s: FinanceSuite;
let server: Server;
let port: number;

beforeAll(async () => {
  s = await setUpFinance(
    restEnv({
      TALLY_HTTP_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      TALLY_HTTP_HEADERS_TIMEOUT_MS: '2000',
      TALLY_HTTP_REQUEST_TIMEOUT_MS: '5000',
    }),
  );
  server = await listen(s.t.app, 0, '127.0.0.1', s.t.ctx.config);
  port = (server.address() as AddressInfo).port;
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

async function open(): Promise<Client> {
  const socket = connect(port, '127.0.0.1');
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
