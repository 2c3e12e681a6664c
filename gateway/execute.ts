// One transaction per request. Everything a read needs is pipelined on one reserved connection:
// BEGIN READ ONLY; role, claims and statement timeout (set_config … true = SET LOCAL); the
// pre-request function; the statement(s); COMMIT — one round trip to Postgres. A write waits
// for its statement's result before it decides COMMIT or ROLLBACK (max-affected, tx=rollback,
// singular responses), so a refused write leaves the database as it was.

import type { ReservedSql, Row, Sql } from 'postgres';
import type { AuthContext } from './call.js';
import { ApiError, connectionError, fromPgError, internalError, isConnectionError, isPgError, poolTimeout, type PgErrorContext } from './errors.js';
import { ident } from './query/sql.js';
import { errorFields, log } from './log.js';

export interface Statement {
  text: string;
  params: (string | null)[];
}

export interface TransactionOptions {
  readOnly: boolean;
  auth: AuthContext;
  anonRole: string;
  preRequest: string | undefined;
  statementTimeoutMs: number;
  /** For error messages: the request is a write. */
  write: boolean;
}

/** Time a request spent waiting for a pooled connection and in its transactions. */
export interface TransactionTiming {
  poolMs: number;
  dbMs: number;
}

/**
 * Database time per request, for the Server-Timing header (server.ts). Keyed by the request's
 * AuthContext, which its authentication step makes afresh for every request and every surface
 * passes down unchanged, so no request-scoped storage is needed; several transactions of one
 * request (an MCP tool) add up.
 */
export const transactionTimings = new WeakMap<AuthContext, TransactionTiming>();

function recordTiming(auth: AuthContext, poolMs: number, dbMs: number): void {
  const t = transactionTimings.get(auth);
  if (t) {
    t.poolMs += poolMs;
    t.dbMs += dbMs;
  } else transactionTimings.set(auth, { poolMs, dbMs });
}

/** Decides the end of a write transaction from its results; throwing rolls back and fails. */
export type Decide = (results: Row[][]) => 'commit' | 'rollback';

const preRequestSql = (name: string) => name.split('.').map(ident).join('.');

export async function runTransaction(db: Sql, opts: TransactionOptions, statements: Statement[], decide?: Decide): Promise<Row[][]> {
  const errorContext: PgErrorContext = {
    anonymous: opts.auth.role === opts.anonRole,
    readOnlyWrite: opts.write && (opts.auth.claims.scope === 'read' || opts.auth.role === 'api_read'),
    statementTimeoutMs: opts.statementTimeoutMs,
  };
  const asked = performance.now();
  let conn: ReservedSql;
  try {
    conn = await reserveWithin(db, POOL_TIMEOUT_MS);
  } catch (err) {
    throw toApiError(err, errorContext); // the database is away: a 503 (errors.ts)
  }
  const reserved = performance.now();
  const deadline = opts.statementTimeoutMs > 0 ? opts.statementTimeoutMs + WATCHDOG_MARGIN_MS : 0;
  let open = false;
  let lost = false;
  try {
    const run = (s: Statement) => conn.unsafe(s.text, s.params.map((v) => (v === null ? null : conn.typed(v, 25))) as never[], { prepare: true });
    const setup: Statement[] = [{
      text: `SELECT pg_catalog.set_config('role', $1, true), pg_catalog.set_config('request.jwt.claims', $2, true), pg_catalog.set_config('statement_timeout', $3, true)`,
      params: [opts.auth.role, JSON.stringify(opts.auth.claims), String(opts.statementTimeoutMs)],
    }];
    if (opts.preRequest) setup.push({ text: `SELECT ${preRequestSql(opts.preRequest)}()`, params: [] });
    const pipelineCommit = opts.readOnly && !decide;
    open = true;
    const pending: Promise<unknown>[] = [
      conn.unsafe(opts.readOnly ? 'BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY' : 'BEGIN ISOLATION LEVEL READ COMMITTED'),
      ...setup.map(run),
      ...statements.map(run),
    ];
    if (pipelineCommit) pending.push(conn.unsafe('COMMIT'));
    const settled = await watched(Promise.allSettled(pending), deadline);
    if (pipelineCommit) open = false; // COMMIT of a failed transaction rolls it back
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const results = settled.slice(1 + setup.length, 1 + setup.length + statements.length)
      .map((s) => (s as PromiseFulfilledResult<Row[]>).value);
    if (open) {
      const end = decide ? decide(results) : 'commit';
      await watched(conn.unsafe(end === 'commit' ? 'COMMIT' : 'ROLLBACK'), deadline);
      open = false;
    }
    return results;
  } catch (err) {
    lost = isConnectionError(err);
    if (open && !lost) await conn.unsafe('ROLLBACK').catch(() => {});
    throw toApiError(err, errorContext);
  } finally {
    // A lost connection is not released: postgres.js (3.4.9) has already moved it to its closed
    // queue, and release() would put it back among the open ones, where the next query written
    // to it throws from a timer (an uncaught TypeError: the process dies) or waits forever. The
    // pool reconnects it when it is needed. Postgres rolls back the transaction of a lost
    // connection itself.
    if (!lost) conn.release();
    recordTiming(opts.auth, reserved - asked, performance.now() - reserved);
  }
}

/**
 * A transaction's statements get an answer within the statement timeout (Postgres cancels them
 * then); this margin later the connection is taken for lost. postgres.js (3.4.9) never settles
 * the queries a reserved connection queued while waiting to describe a new prepared statement
 * when the connection closes meanwhile (Postgres restarting): without this, such a request
 * would hang for good.
 */
const WATCHDOG_MARGIN_MS = 2000;

function watched<T>(work: Promise<T>, ms: number): Promise<T> {
  if (ms <= 0) return work;
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error('no answer from the database connection'), { code: 'CONNECTION_CLOSED' })), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** How long a request waits for a pooled connection before it is answered 504 (PGRST003). */
export const POOL_TIMEOUT_MS = 3000;

/**
 * db.reserve(), bounded. While Postgres restarts, postgres.js can keep a reservation waiting
 * long after the database is back (seen in tests/faults.test.ts: 8 s and more); a request
 * should fail fast instead. A connection that arrives after the deadline goes back to the pool.
 */
async function reserveWithin(db: Sql, ms: number): Promise<ReservedSql> {
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  const reserving = db.reserve();
  try {
    return await Promise.race([
      reserving,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          late = true;
          reject(poolTimeout(ms));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (late) reserving.then((c) => c.release(), () => {});
  }
}

export function toApiError(err: unknown, ctx: PgErrorContext): ApiError {
  if (err instanceof ApiError) return err;
  const mapped = isConnectionError(err) ? connectionError(err) : isPgError(err) ? fromPgError(err, ctx) : internalError();
  // The client gets the one error shape and nothing internal; the log gets what happened.
  if (mapped.status >= 500) log.error({ ...errorFields(err), status: mapped.status }, 'request failed in the database layer');
  return mapped;
}
