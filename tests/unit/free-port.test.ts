import { createServer, type Server } from 'node:net';
import { freePort, testPortRange, type PortRange } from '../../gateway/db/free-port.js';
import { keepListenersIn } from '../harness/test-ports.js';

// freePort() is called for several servers in a row (a Citus cluster's nodes, PgBouncer and its
// primary, a CLI's Postgres and HTTP ports) before any of them listens. Linux picks a closed
// port at random from the odd half of the ephemeral range (connect() takes the even half, so
// outgoing connections do not take these), and picks an earlier one again: 936 distinct ports
// in 1,000 calls on this machine's kernel before the fix. Two servers given one port race for
// it, and one fails to start.

test('never hands out one port twice in a process', async () => {
  const ports: number[] = [];
  for (let i = 0; i < 1000; i++) ports.push(await freePort());
  expect(new Set(ports).size).toBe(ports.length);
});

// TALLY_TEST_PORTS keeps every server of the suites in a range: the even ports for servers
// started next (freePort), the odd ones for servers that listen at once on "any port"
// (supertest's, a test's own: tests/harness/test-ports.ts).

test('TALLY_TEST_PORTS is read as a range of at least 100 ports above 1023, or refused in a sentence', () => {
  expect(testPortRange('20000-29999')).toEqual({ first: 20000, last: 29999 });
  expect(testPortRange('')).toBeUndefined();
  expect(testPortRange(undefined)).toBeUndefined();
  for (const bad of ['20000', '20000-20010', '80-1000', '30000-20000', '60000-70000', 'a-b']) {
    expect(() => testPortRange(bad)).toThrow(
      `TALLY_TEST_PORTS=${bad}: give a range of at least 100 ports between 1024 and 65535, as 20000-29999`,
    );
  }
});

/** Listens on each of `ports` (all must be free), for a range whose ports are taken. */
async function occupy(ports: number[]): Promise<Server[] | undefined> {
  const servers: Server[] = [];
  for (const port of ports) {
    const srv = createServer();
    const ok = await new Promise<boolean>((resolve) => {
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!ok) {
      await close(servers);
      return undefined;
    }
    servers.push(srv);
  }
  return servers;
}

function close(servers: Server[]): Promise<unknown> {
  return Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
}

/** A range of 100 ports of which all but `free` of the given parity are taken, and those servers. */
async function crowdedRange(parity: 0 | 1, free: number): Promise<{ range: PortRange; servers: Server[] }> {
  for (let first = 20000; first < 30000; first += 100) {
    const range = { first, last: first + 99 };
    const ports = Array.from({ length: 50 }, (_, i) => first + parity + 2 * i).filter((p) => p !== free + first);
    const servers = await occupy(ports);
    if (servers) return { range, servers };
  }
  throw new Error('no range of 100 ports with every port free between 20000 and 30000');
}

test('freePort gives even ports of the range, each once, and passes over one that is taken', async () => {
  const range = { first: 20000, last: 29999 };
  const ports = await Promise.all(Array.from({ length: 200 }, () => freePort(range)));
  expect(new Set(ports).size).toBe(ports.length);
  expect(ports.filter((p) => p % 2 !== 0 || p < range.first || p > range.last)).toEqual([]);

  const { range: crowded, servers } = await crowdedRange(0, 42);
  try {
    expect(await freePort(crowded)).toBe(crowded.first + 42);
    await expect(freePort(crowded)).rejects.toThrow(
      `no free even port left in TALLY_TEST_PORTS=${crowded.first}-${crowded.last}`,
    );
  } finally {
    await close(servers);
  }
});

test('a server that listens on port 0 listens on an odd port of the range, another one while that is taken', async () => {
  const { range, servers } = await crowdedRange(1, 77);
  const undo = keepListenersIn(range);
  try {
    const srv = createServer();
    let called = 0;
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        called++;
        resolve();
      });
    });
    expect([(srv.address() as { port: number }).port, called]).toEqual([range.first + 77, 1]);
    // Every odd port taken now: the caller sees the error, as without a range.
    const full = createServer();
    const code = await new Promise((resolve) => {
      full.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
      full.listen({ port: 0, host: '127.0.0.1' }, () => resolve('listening'));
    });
    expect(code).toBe('EADDRINUSE');
    await close([srv]);
  } finally {
    undo();
    await close(servers);
  }
});
