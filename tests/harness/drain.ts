import type { Sql } from 'postgres';
import { exited } from './cli.js';
import type { Servers } from './servers.js';
import { waitFor } from './wait.js';

// SIGTERM of one of several processes under keep-alive load, as a rolling deploy does it: the
// process stops accepting, finishes what it has, and tells each keep-alive client to close
// (Connection: close on its next answer) instead of closing sockets under a request the client
// is sending. A connection refused is the load balancer's to retry elsewhere; a request sent and
// then reset is lost (the client cannot know whether it was written). Shared by the suites of
// several processes on one Postgres and behind PgBouncer.

export interface DrainOutcome {
  /** Requests sent and not answered 201: must be none. */
  lost: string[];
  /** The stopped process's exit code. */
  code: number | null;
  /** Connections the stopped process refused (the load did run while it stopped). */
  refused: number;
  /** Writes answered 201. */
  acknowledged: number;
}

/**
 * `clients` keep-alive clients write to the first process until it has taken 200 writes, then
 * it gets SIGTERM; a client refused goes on with the next process, as a load balancer would,
 * until the others have taken 100 more. Each write's name matches `c%#%`.
 */
export async function sigtermUnderLoad(
  servers: Servers,
  headers: Record<string, string>,
  clients = 8,
): Promise<DrainOutcome> {
  const [draining, ...staying] = servers.bases as [string, ...string[]];
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
          base = staying[n % staying.length]!; // what a load balancer does with a refused connection
          i--;
        } else lost.push(`${code ?? String(err)} from ${base === draining ? 'the draining process' : 'another'}`);
      }
    }
  };
  const running = Array.from({ length: clients }, (_, n) => client(n));
  await waitFor(() => onDraining >= 200, 'load on the process to stop');
  child.kill('SIGTERM');
  const code = await exited(child);
  const atExit = acknowledged;
  await waitFor(() => acknowledged >= atExit + 100 || lost.length > 0, 'load on the other processes');
  stop = true;
  await Promise.all(running);
  return { lost, code, refused, acknowledged };
}

/** How many of sigtermUnderLoad's writes the workspace holds. */
export async function writtenUnderLoad(admin: Sql, workspace: string): Promise<number> {
  const [row] = await admin<{ n: number }[]>`
    SELECT count(*)::int AS n FROM public.personal_transactions WHERE workspace_id = ${workspace} AND name LIKE 'c%#%'`;
  return row?.n ?? 0;
}
