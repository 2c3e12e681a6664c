import { Router } from 'express';
import type { Pool } from './engine/pool.js';

// Liveness and readiness for load balancers and orchestrators.

/** /readyz answers within 2 s whatever the database does. */
const READY_DEADLINE_MS = 1500;

export function healthRouter(db: Pool): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready: a pooled connection answers within READY_DEADLINE_MS, on a database that accepts
  // writes. A pool whose every slot is stuck is not ready either (503), and the answer says how
  // many slots are free.
  router.get('/readyz', async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    const probe = db<{ read_only: boolean }[]>`
      SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean AS read_only`;
    try {
      const [state] = await Promise.race([
        probe,
        new Promise<never>((_, reject) => (timer = setTimeout(reject, READY_DEADLINE_MS))),
      ]);
      if (state?.read_only) {
        res.status(503).set('Retry-After', '5').json({
          status: 'read-only',
          message: 'The database accepts no writes (a hot standby, in recovery, or default_transaction_read_only)',
          pool: db.stats(),
        });
      } else res.json({ status: 'ready', pool: db.stats() });
    } catch {
      probe.catch(() => {});
      res.status(503).set('Retry-After', '5').json({
        status: 'unavailable',
        message: 'The database is not reachable or the pool has no free connection',
        pool: db.stats(),
      });
    } finally {
      clearTimeout(timer);
    }
  });
  return router;
}
