import type { ChildProcess } from 'node:child_process';
import { exited, tallyServer } from './cli.js';
import { TEST_JWT_SECRET } from './app.js';
import { serverUrl } from './db.js';
import { listenPort } from '../../gateway/db/free-port.js';

// Several `tally serve` processes on one database, as a deployment behind a load balancer runs
// them: each its own process, pool and caches, all logged in as the server's login.

export interface Servers {
  /** Each process's base URL, e.g. http://127.0.0.1:PORT. */
  bases: string[];
  children: ChildProcess[];
  /** Every line each process wrote so far (read anew on each access). */
  readonly output: string[];
  /** SIGTERM to every process still running, and waits for each to exit. */
  close(): Promise<void>;
}

export async function startServers(
  n: number,
  ownerUrl: string,
  env: Record<string, string | undefined> = {},
  /** The server's login URL; the owner URL's database as `authenticator` by default. */
  loginUrl = serverUrl(ownerUrl),
): Promise<Servers> {
  const started = await Promise.all(
    Array.from({ length: n }, async () =>
      tallyServer(
        ['serve'],
        {
          DATABASE_URL: ownerUrl,
          TALLY_DB_URI: loginUrl,
          TALLY_JWT_SECRET: TEST_JWT_SECRET,
          // The harness's cluster is shared by every test file, and the blog fixture makes the
          // server's login a member of its roles (tests/fixtures/blog.sql): they count as API
          // roles here, or the start-up check would refuse the login.
          TALLY_DB_API_ROLES: 'anon,api_read,api_write,blog_anon,blog_user',
          PORT: String(await listenPort()),
          HOST: '127.0.0.1',
          ...env,
        },
        /Tally is up on (\S+)/,
      ),
    ),
  );
  const children = started.map((s) => s.child);
  return {
    bases: started.map((s) => /Tally is up on (\S+)/.exec(s.output)![1]!),
    children,
    get output() {
      return started.map((s) => s.output);
    },
    async close() {
      await Promise.all(
        children.map((c) => {
          if (c.exitCode !== null || c.signalCode !== null) return undefined;
          c.kill('SIGTERM');
          return exited(c);
        }),
      );
    },
  };
}
