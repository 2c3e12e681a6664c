import { createServer } from 'node:net';

/**
 * The ports freePort() handed out in this process. The kernel may pick again a port it gave
 * before, closed since (65-70 of 1,000 calls repeated an earlier one, now and then the one just
 * before), and the servers a test or the bench starts in a row, none listening yet, would then
 * race for one port: one fails to start.
 */
const handedOut = new Set<number>();

/** Ports from `first` to `last`, both included. */
export interface PortRange {
  first: number;
  last: number;
}

/**
 * The ports the test suites and the bench may listen on: TALLY_TEST_PORTS (`20000-29999`) on a
 * machine that keeps others for its own services, else undefined (any port the kernel gives).
 * A range of the kernel's ephemeral ports (net.ipv4.ip_local_port_range) would share them with
 * outgoing connections: choose one outside it.
 */
export function testPortRange(value = process.env.TALLY_TEST_PORTS): PortRange | undefined {
  if (value === undefined || value === '') return undefined;
  const m = /^(\d+)-(\d+)$/.exec(value.trim());
  const [first, last] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
  if (!(first >= 1024 && last <= 65535 && last - first >= 99)) {
    throw new Error(
      `TALLY_TEST_PORTS=${value}: give a range of at least 100 ports between 1024 and 65535, as 20000-29999`,
    );
  }
  return { first, last };
}

/**
 * A TCP port on loopback that is free now and not handed out before: for a server started next
 * (tests, bench). Within TALLY_TEST_PORTS, an even one: the suites' servers that bind at once
 * take odd ones (tests/harness/test-ports.ts), so that one never takes a port handed out here
 * before its server listens.
 */
export async function freePort(range = testPortRange()): Promise<number> {
  if (!range) {
    for (;;) {
      const port = await anyFreePort();
      if (!handedOut.has(port)) return handOut(port);
    }
  }
  let port = nextPortIn(range, 0);
  for (let tries = 0; tries <= (range.last - range.first) / 2; tries++) {
    if (!handedOut.has(port)) {
      handOut(port); // before the check, which waits: a call meanwhile passes it over
      if ((await portProblem(port, '127.0.0.1')) === undefined) return port;
      handedOut.delete(port);
    }
    port = nextPortIn(range, 0, port);
  }
  throw new Error(`no free even port left in TALLY_TEST_PORTS=${range.first}-${range.last}`);
}

function handOut(port: number): number {
  handedOut.add(port);
  return port;
}

/**
 * The PORT to give a server started next: 0 (it binds a port the kernel picks, and says which),
 * or within TALLY_TEST_PORTS a free port of the range.
 */
export async function listenPort(range = testPortRange()): Promise<number> {
  return range ? freePort(range) : 0;
}

/**
 * A port of `range` whose remainder by 2 is `parity`: the next one after `after` (round to the
 * start after the end), or without it one at random, so that processes start apart.
 */
export function nextPortIn(range: PortRange, parity: 0 | 1, after?: number): number {
  const first = range.first + ((range.first + parity) % 2);
  const count = Math.floor((range.last - first) / 2) + 1;
  const index = after === undefined ? Math.floor(Math.random() * count) : ((after - first) / 2 + 1) % count;
  return first + 2 * index;
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/**
 * Whether `port` on `host` can be listened on now: undefined when it can, else the reason
 * (EADDRINUSE, EACCES…). Checked before a start's slow steps, so that a taken port is said
 * at once and not after initdb, the migrations and the seed.
 */
export function portProblem(port: number, host: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    srv.listen(port, host, () => srv.close(() => resolve(undefined)));
  });
}
