// The one error shape of every surface, PostgREST's: {code, message, details, hint}, with an
// HTTP status. Nothing else (no stack, no SQL text) ever reaches a client.

import { readOnlyError } from './auth/scopes.js';
import { constraintMessage } from './fields.js';
import { raisedError } from './raised-error.js';

/** PGRST201 lists the candidate relationships as objects, as PostgREST does. */
export type ErrorDetails = string | null | Record<string, string>[];

export interface ErrorBody {
  code: string;
  message: string;
  details: ErrorDetails;
  hint: string | null;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetails = null,
    readonly hint: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): ErrorBody {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint };
  }
}

/** A 500 that says nothing about the internals; the cause is logged, never sent. */
export function internalError(): ApiError {
  return new ApiError(500, 'PGRST000', 'Internal server error', null, 'This is a bug in Tally; the server log has the details');
}

// ---- Postgres errors → HTTP, as PostgREST maps them -------------------------------------

/** What a postgres.js error carries (PostgresError). */
export interface PgErrorLike {
  code: string;
  message: string;
  detail?: string;
  hint?: string;
  column_name?: string;
  constraint_name?: string;
  table_name?: string;
}

export function isPgError(err: unknown): err is PgErrorLike {
  return typeof err === 'object' && err !== null && (err as { name?: string }).name === 'PostgresError'
    && typeof (err as { code?: unknown }).code === 'string';
}

/** PostgREST's status for a SQLSTATE (docs "HTTP Status Codes"); 42501 depends on the role. */
function pgErrorStatus(code: string, anonymous: boolean): number {
  if (code === '42501') return anonymous ? 401 : 403;
  if (code === '57014') return 504; // statement timeout: the query was cancelled, not broken
  if (/^PT\d{3}$/.test(code)) return Number(code.slice(2));
  if (code === '23503' || code === '23505') return 409;
  if (code === '25006') return 405;
  if (code === '42883' || code === '42P01') return 404;
  if (code === '42P17') return 500;
  if (code === 'P0001') return 400;
  if (code === '53400') return 500;
  if (code.startsWith('54')) return 400; // program limit exceeded: too many columns, too deep, too large
  const cls = code.slice(0, 2);
  if (cls === '08' || cls === '53') return 503;
  if (cls === '0L' || cls === '0P' || cls === '28') return 403;
  if (['09', '25', '2D', '38', '39', '3B', '40', '54', '55', '57', '58', 'F0', 'HV', 'P0', 'XX'].includes(cls)) return 500;
  return 400;
}

export interface PgErrorContext {
  /** The request ran as the anonymous role (42501 is then a 401). */
  anonymous: boolean;
  /** The caller holds a read-only token and tried to write. */
  readOnlyWrite: boolean;
  statementTimeoutMs: number;
}

/**
 * A database error as the client sees it: PostgREST's shape, the SQLSTATE as code, Postgres's
 * message, detail and hint. Messages name tables, columns and constraints (useful to a client),
 * never SQL text.
 */
export function fromPgError(err: PgErrorLike, ctx: PgErrorContext): ApiError {
  if (err.code === 'PGRST') return raisedError(err);
  const status = pgErrorStatus(err.code, ctx.anonymous);
  let message = err.message;
  let details: string | null = err.detail ?? null;
  let hint: string | null = err.hint ?? null;
  const headers: Record<string, string> = {};
  if (err.code === '42501') {
    if (ctx.anonymous) {
      headers['WWW-Authenticate'] = 'Bearer';
      hint ??= 'Send an access token: Authorization: Bearer <JWT>';
    } else if (ctx.readOnlyWrite) {
      // Every surface (/rest/v1, /api/v1, MCP) says the same: the token is read-only.
      const refusal = readOnlyError();
      message = refusal.message;
      details = err.message; // names the table
      hint = refusal.hint;
    } else if (/row-level security/.test(err.message)) {
      hint ??= 'Rows belong to the workspace of your token: leave workspace_id out of the body, and only reference rows of your workspace';
    }
  } else if (err.code === '57014') {
    message = 'The query was cancelled because it ran longer than the statement timeout';
    details = `statement timeout: ${ctx.statementTimeoutMs} ms`;
    hint = 'Narrow the request with filters or a smaller limit';
  } else if (constraintMessage(err) !== undefined) {
    // One sentence naming the field, the same on every surface (gateway/fields.ts); Postgres's
    // own text stays in details.
    message = constraintMessage(err)!;
    details = err.constraint_name ? `constraint: ${err.constraint_name}` : err.message;
  } else if (err.code.startsWith('54')) {
    // Postgres's own message says which limit ("target lists can have at most 1664 entries").
    hint = 'The request exceeds a limit of the database: ask for fewer columns, less nesting or fewer rows';
  } else if (status === 500 || status === 503) {
    // Internal states (connection, resources, transaction) say nothing useful to a client;
    // execute.ts logs the original error.
    message = status === 503 ? 'The database is not available' : 'The database could not complete the request';
    details = null;
    hint = null;
  }
  if (details === null && err.column_name && (err.code.startsWith('23') || err.code.startsWith('22'))) details = `column: ${err.column_name}`;
  if (details === null && err.constraint_name && err.code.startsWith('23')) details = `constraint: ${err.constraint_name}`;
  return new ApiError(status, err.code, message, details, hint, headers);
}

// ---- The database unreachable: PostgREST's connection errors --------------------------------

/** postgres.js's codes for a connection that could not be made or was lost. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'CONNECT_TIMEOUT']);
const LOST = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED']);
/** admin_shutdown, crash_shutdown, cannot_connect_now: Postgres is stopping or starting. */
const SHUTTING_DOWN = new Set(['57P01', '57P02', '57P03']);

/** Seconds a client should wait before it retries while the database is away. */
const DATABASE_RETRY_AFTER_SECONDS = 2;

export function isConnectionError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return UNREACHABLE.has(code) || LOST.has(code) || (isPgError(err) && (SHUTTING_DOWN.has(code) || code.startsWith('08')));
}

/**
 * 503 with Retry-After, as PostgREST answers while it has no database: PGRST000 when no
 * connection could be made, PGRST001 when one was lost or Postgres is shutting down. The pool
 * reconnects by itself on the next request; nothing needs a restart.
 */
export function connectionError(err: unknown): ApiError {
  const code = (err as { code?: string }).code ?? '';
  const unreachable = UNREACHABLE.has(code) || code === '57P03';
  return new ApiError(503, unreachable ? 'PGRST000' : 'PGRST001',
    unreachable ? 'Could not connect with the database' : 'The connection with the database was lost',
    null, `The database is not available at the moment; retry in ${DATABASE_RETRY_AFTER_SECONDS} seconds`,
    { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
}

/** PostgREST's PGRST003: no pooled connection became free in time (504, retry later). */
export function poolTimeout(ms: number): ApiError {
  return new ApiError(504, 'PGRST003', 'Timed out acquiring a connection from the database pool', `waited ${ms} ms`,
    `The database is busy or restarting; retry in ${DATABASE_RETRY_AFTER_SECONDS} seconds`,
    { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
}
