import { createServer } from 'node:net';

/** A TCP port on loopback that is free now: for a Postgres or server started next (tests, bench). */
export function freePort(): Promise<number> {
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
