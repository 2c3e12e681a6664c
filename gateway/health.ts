import { Router } from 'express';
import type { Pool } from './engine/pool.js';

// Liveness and readiness for load balancers and orchestrators.

/** /readyz answers within 2 s whatever the database does. */
const READY_DEADLINE_MS = 1500;
/**
 * The database is probed at most once a second, whoever asks how often: /readyz is public, and
 * a probe per request let one client (500 pipelined requests on one socket) queue hundreds of
 * statements in the pool. Requests within a second of a probe, or while it runs, share its answer.
 */
const PROBE_INTERVAL_MS = 1000;

type State = 'ready' | 'read-only' | 'unavailable';

/** A pooled connection answers within READY_DEADLINE_MS, on a database that accepts writes. */
async function probe(db: Pool): Promise<State> {
  let timer: NodeJS.Timeout | undefined;
  const asked = db<{ read_only: boolean }[]>`
    SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean AS read_only`;
  try {
    const [state] = await Promise.race([
      asked,
      new Promise<never>((_, reject) => (timer = setTimeout(reject, READY_DEADLINE_MS))),
    ]);
    return state?.read_only ? 'read-only' : 'ready';
  } catch {
    asked.catch(() => {});
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

export function healthRouter(db: Pool): Router {
  const router = Router();
  let last: { at: number; state: Promise<State> } | undefined;
  const state = (): Promise<State> => {
    const now = Date.now();
    if (!last || now - last.at >= PROBE_INTERVAL_MS) last = { at: now, state: probe(db) };
    return last.state;
  };
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready: the probe passed. A pool whose every slot is stuck is not ready either (503), and the
  // answer says how many slots are free (now, not at the probe).
  router.get('/readyz', async (_req, res) => {
    const now = await state();
    if (now === 'ready') return void res.json({ status: 'ready', pool: db.stats() });
    res
      .status(503)
      .set('Retry-After', '5')
      .json(
        now === 'read-only'
          ? {
              status: 'read-only',
              message: 'The database accepts no writes (a hot standby, in recovery, or default_transaction_read_only)',
              pool: db.stats(),
            }
          : {
              status: 'unavailable',
              message: 'The database is not reachable or the pool has no free connection',
              pool: db.stats(),
            },
      );
  });
  return router;
}
