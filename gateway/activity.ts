// What the activity log and the idempotency keys keep (sql/app/definitions/activity.sql and
// idempotency.sql). Every hour: the log's changes older than TALLY_ACTIVITY_RETENTION_DAYS, and
// the keys older than their 24 hours, are deleted. Every minute: the log of a workspace past half
// its budget (TALLY_ACTIVITY_BUDGET_BYTES) loses its oldest changes, but none of the last 24
// hours, back to half (a write that would take it past the whole budget is refused in its own
// transaction). A serving process sweeps at start and then on those timers; with several
// processes each does, and a delete of what another already deleted costs nothing.

import type { Pool } from './engine/pool.js';
import type { Config } from './config.js';
import { log } from './engine/log.js';

const HOUR_MS = 60 * 60 * 1000;
const MINUTE_MS = 60 * 1000;

/** Runs one of the sweep's functions; answers how many rows it deleted. */
async function sweep(db: Pool, run: (db: Pool) => Promise<{ n: string }[]>): Promise<number> {
  const [row] = await run(db);
  return Number(row?.n ?? 0);
}

/** The hourly sweep: the retention of the log, and the keys' 24 hours. */
async function expire(db: Pool, days: number): Promise<void> {
  const gone = await sweep(db, (db) => db<{ n: string }[]>`SELECT tally.prune_activity(${days})::text AS n`);
  if (gone > 0) log.info({ rows: gone, days }, 'activity older than the retention pruned');
  const keys = await sweep(db, (db) => db<{ n: string }[]>`SELECT tally.prune_idempotency_keys()::text AS n`);
  if (keys > 0) log.info({ rows: keys }, 'idempotency keys older than 24 hours pruned');
}

/** The sweep of every minute: each workspace's log within its budget, one transaction per workspace. */
async function keepWithinBudget(db: Pool, budget: number): Promise<void> {
  const over = await db<{ ws: string }[]>`SELECT tally.activity_over_budget(${budget}) AS ws`;
  for (const { ws } of over) {
    const gone = await sweep(
      db,
      (db) => db<{ n: string }[]>`SELECT tally.prune_activity_budget(${ws}, ${budget})::text AS n`,
    );
    if (gone > 0) log.info({ rows: gone, budget, workspace: ws }, 'activity pruned to keep a log within its budget');
  }
}

/**
 * Runs `work` now and every `ms` until the returned function is called (the timer keeps no
 * process alive). A tick that comes while the last run is still at work is skipped: a sweep of
 * many workspaces that takes longer than its interval would otherwise start again on top of
 * itself, each run holding a connection of the pool.
 */
export function every(ms: number, work: () => Promise<void>, what: string): () => void {
  let running = false;
  const run = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      await work();
    } catch (err) {
      // The next run tries again; a failed sweep loses nothing.
      log.warn({ err: String(err) }, `${what} failed`);
    } finally {
      running = false;
    }
  };
  void run();
  const timer = setInterval(() => void run(), ms);
  timer.unref();
  return () => clearInterval(timer);
}

/** Sweeps the log and the keys as the configuration says, until the returned function is called. */
export function keepActivity(
  db: Pool,
  config: Pick<Config, 'activityRetentionDays' | 'activityBudgetBytes'>,
): () => void {
  const stops = [
    every(HOUR_MS, () => expire(db, config.activityRetentionDays), 'pruning the activity log or the idempotency keys'),
    every(MINUTE_MS, () => keepWithinBudget(db, config.activityBudgetBytes), 'pruning the activity log to its budget'),
  ];
  return () => stops.forEach((stop) => stop());
}
