import { createServer } from 'node:net';

/**
 * The ports freePort() handed out in this process. The kernel may pick again a port it gave
 * before, closed since (65-70 of 1,000 calls repeated an earlier one, now and then the one just
 * before), and the servers a test or the bench starts in a row, none listening yet, would then
 * race for one port: one fails to start.
 */
const handedOut = new Set<number>();

/** A TCP port on loopback that is free now and not handed out before: for a server started next (tests, bench). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
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
