// One transaction per request. Everything a read needs is pipelined on one reserved connection:
// BEGIN READ ONLY; role, claims and statement timeout (set_config … true = SET LOCAL); the
// pre-request function; the statement(s); COMMIT — one round trip to Postgres. A write waits
// for its statement's result before it decides COMMIT or ROLLBACK (max-affected, tx=rollback,
// singular responses), so a refused write leaves the database as it was.

import type { Row, Sql } from 'postgres';
import type { AuthContext } from './call.js';
import { ApiError, fromPgError, internalError, isPgError, type PgErrorContext } from './errors.js';
import { ident } from './query/sql.js';

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

/** Decides the end of a write transaction from its results; throwing rolls back and fails. */
export type Decide = (results: Row[][]) => 'commit' | 'rollback';

const preRequestSql = (name: string) => name.split('.').map(ident).join('.');

export async function runTransaction(db: Sql, opts: TransactionOptions, statements: Statement[], decide?: Decide): Promise<Row[][]> {
  const errorContext: PgErrorContext = {
    anonymous: opts.auth.role === opts.anonRole,
    readOnlyWrite: opts.write && (opts.auth.claims.scope === 'read' || opts.auth.role === 'api_read'),
    statementTimeoutMs: opts.statementTimeoutMs,
  };
  const conn = await db.reserve();
  let open = false;
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
    const settled = await Promise.allSettled(pending);
    if (pipelineCommit) open = false; // COMMIT of a failed transaction rolls it back
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const results = settled.slice(1 + setup.length, 1 + setup.length + statements.length)
      .map((s) => (s as PromiseFulfilledResult<Row[]>).value);
    if (open) {
      const end = decide ? decide(results) : 'commit';
      await conn.unsafe(end === 'commit' ? 'COMMIT' : 'ROLLBACK');
      open = false;
    }
    return results;
  } catch (err) {
    if (open) await conn.unsafe('ROLLBACK').catch(() => {});
    throw toApiError(err, errorContext);
  } finally {
    conn.release();
  }
}

export function toApiError(err: unknown, ctx: PgErrorContext): ApiError {
  if (err instanceof ApiError) return err;
  if (isPgError(err)) return fromPgError(err, ctx);
  console.error('tally: unexpected error while executing a request', err instanceof Error ? err.stack : err);
  return internalError();
}
