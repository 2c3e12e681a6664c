// The activity log's retention: every change of a workspace's records is kept for
// TALLY_ACTIVITY_RETENTION_DAYS (sql/app/definitions/activity.sql writes it; tally.prune_activity deletes
// what is older); the same sweep deletes the idempotency keys older than their 24 hours
// (sql/app/definitions/idempotency.sql). A serving process prunes at start and then every hour; with
// several processes each does, and a delete of what another already deleted costs nothing.

import type { Pool } from './engine/pool.js';
import { log } from './engine/log.js';

const EVERY_MS = 60 * 60 * 1000;

/** Deletes the activity older than `days`; returns how many rows went. */
async function pruneActivity(db: Pool, days: number): Promise<number> {
  const [row] = await db<{ n: string }[]>`SELECT tally.prune_activity(${days})::text AS n`;
  return Number(row?.n ?? 0);
}

/** Deletes the expired idempotency keys; returns how many went. */
async function pruneIdempotencyKeys(db: Pool): Promise<number> {
  const [row] = await db<{ n: string }[]>`SELECT tally.prune_idempotency_keys()::text AS n`;
  return Number(row?.n ?? 0);
}

/** Prunes now and every hour until the returned function is called (the timer keeps no process alive). */
export function keepActivity(db: Pool, days: number): () => void {
  const run = async (): Promise<void> => {
    try {
      const gone = await pruneActivity(db, days);
      if (gone > 0) log.info({ rows: gone, days }, 'activity older than the retention pruned');
      const keys = await pruneIdempotencyKeys(db);
      if (keys > 0) log.info({ rows: keys }, 'idempotency keys older than 24 hours pruned');
    } catch (err) {
      // The next hour tries again; a failed sweep loses nothing.
      log.warn({ err: String(err) }, 'pruning the activity log or the idempotency keys failed');
    }
  };
  void run();
  const timer = setInterval(() => void run(), EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
