import { accessToken } from './harness/app.js';
import { exited } from './harness/cli.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tokenFor, workspaceWithData } from './harness/fixtures.js';
import { TEST_API_KEY } from './harness/rest.js';
import { startServers, type Servers } from './harness/servers.js';
import { waitFor } from './harness/wait.js';

// SIGTERM of one of several processes under keep-alive load, as a rolling deploy does it: the
// process stops accepting, finishes what it has, and tells each keep-alive client to close
// (Connection: close on its next answer) instead of closing sockets under a request the client
// is sending. A connection refused is the load balancer's to retry elsewhere; a request sent and
// then reset is lost (the client cannot know whether it was written).

const CLIENTS = 8;

describe('SIGTERM of one of two processes under keep-alive load', () => {
  let db: TestDatabase;
  let servers: Servers;
  let headers: Record<string, string>;
  let workspace: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    const ws = await workspaceWithData(db.admin, 'drain');
    workspace = ws.id;
    const token = await tokenFor(db.admin, ws.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: ws.id, scope: 'write', sub: token.id });
    headers = {
      apikey: TEST_API_KEY,
      authorization: `Bearer ${jwt}`,
      'content-type': 'application/json',
      prefer: 'return=minimal',
    };
    servers = await startServers(2, db.url, {
      TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
      TALLY_RATE_LIMIT_PER_MINUTE: '1000000',
    });
  });
  afterAll(async () => {
    await servers?.close();
    await db?.drop();
  });

  it('loses no request: every one is answered, or refused before it was sent and retried elsewhere', async () => {
    const [draining, staying] = servers.bases as [string, string];
    const child = servers.children[0]!;
    let acknowledged = 0;
    let onDraining = 0;
    let refused = 0;
    const lost: string[] = [];
    let stop = false;

    const client = async (n: number): Promise<void> => {
      let base = draining;
      for (let i = 0; !stop && i < 100_000; i++) {
        const body = JSON.stringify({ name: `c${n} #${i}`, amount: 1, category_id: 'other', method_id: 'cash' });
        try {
          const res = await fetch(`${base}/rest/v1/personal_transactions`, { method: 'POST', headers, body });
          await res.arrayBuffer();
          if (res.status !== 201) lost.push(`HTTP ${res.status}`);
          else {
            acknowledged++;
            if (base === draining) onDraining++;
          }
        } catch (err) {
          const code = (err as { cause?: { code?: string } }).cause?.code;
          if (code === 'ECONNREFUSED' && base === draining) {
            refused++;
            base = staying; // what a load balancer does with a refused connection
            i--;
          } else lost.push(`${code ?? String(err)} from ${base === draining ? 'the draining process' : 'the other'}`);
        }
      }
    };
    const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
    await waitFor(() => onDraining >= 200, 'load on the process to stop');
    child.kill('SIGTERM');
    const code = await exited(child);
    const atExit = acknowledged;
    await waitFor(() => acknowledged >= atExit + 100 || lost.length > 0, 'load on the other process');
    stop = true;
    await Promise.all(clients);

    expect(lost).toEqual([]);
    expect(code).toBe(0);
    expect(refused).toBeGreaterThan(0); // the process did stop while the load ran
    const [written] = await db.admin<{ n: number }[]>`
      SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${workspace} AND name LIKE 'c%#%'`;
    expect(written?.n).toBe(acknowledged);
  });
});
