// Anything thrown, as the ApiError a client gets (toApiError): a Postgres error as PostgREST
// maps it to a status (in the deployment's wording where it gives one), an error a function
// raised in PostgREST's way, a lost or unreachable database, and anything else a 500 the caller
// logs. The errors themselves, every one of them, are entries of catalogue.ts beside this file;
// nothing else (no stack, no SQL text) ever reaches a client.

import { catalogue, ApiError } from './catalogue.js';
import { isSendableHeader } from '../query/settings.js';

// ---- Postgres errors → HTTP, as PostgREST maps them -------------------------------------

/** What a postgres.js error carries (PostgresError). */
export interface PgErrorLike {
  code: string;
  message: string;
  /** ERROR, FATAL, PANIC, …: after FATAL or PANIC the server ends the session. */
  severity?: string;
  detail?: string;
  hint?: string;
  column_name?: string;
  constraint_name?: string;
  table_name?: string;
}

export function isPgError(err: unknown): err is PgErrorLike {
  return (
    typeof err === 'object' &&
    err !== null &&
    (err as { name?: string }).name === 'PostgresError' &&
    typeof (err as { code?: unknown }).code === 'string'
  );
}

/** PostgREST's status for a SQLSTATE (docs "HTTP Status Codes"); 42501 depends on the role. */
function pgErrorStatus(code: string, anonymous: boolean): number {
  if (code === '42501') return anonymous ? 401 : 403;
  if (code === '57014') return 504; // statement timeout: the query was cancelled, not broken
  if (/^PT\d{3}$/.test(code)) return Number(code.slice(2));
  if (code.startsWith('PT')) return 500; // a PT code that names no status (PT40A), as PostgREST
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
  if (['09', '25', '2D', '38', '39', '3B', '40', '54', '55', '57', '58', 'F0', 'HV', 'P0', 'XX'].includes(cls))
    return 500;
  return 400;
}

/** How a deployment words the database errors the engine answers (GatewayOptions). */
export interface ErrorWording {
  /** The deployment's one-sentence wording of a constraint error, when it has one. */
  describeConstraint?: DescribeConstraint;
  /** The hint of a write refused to a read-only role (42501). */
  readOnlyHint?: string;
  /** The hint of a write row-level security refused (42501): whose rows a caller may write. */
  rowSecurityHint?: string;
}

export interface PgErrorContext extends ErrorWording {
  /** The request ran as the anonymous role (42501 is then a 401). */
  anonymous: boolean;
  /** The caller holds a read-only token and tried to write. */
  readOnlyWrite: boolean;
  /** The engine began the transaction READ ONLY (a read): a 25006 is then the request's doing. */
  readOnlyTransaction: boolean;
  statementTimeoutMs: number;
}

/** A sentence naming the field and what is allowed, for a constraint or data error; else undefined. */
type DescribeConstraint = (err: PgErrorLike) => string | undefined;

// ---- PostgREST's custom errors from SQL ------------------------------------------------------

// `RAISE SQLSTATE 'PGRST' USING message = '{"code": …, "message": …, "details": …, "hint": …}',
// detail = '{"status": 402, "headers": {…}}'`: the function decides the whole response, its
// status, headers and body.

const text = (v: unknown): string | null =>
  typeof v === 'string' ? v : v === undefined || v === null ? null : JSON.stringify(v);

function raisedError(err: { message: string; detail?: string }): ApiError {
  let body: Record<string, unknown>;
  let meta: { status?: unknown; headers?: unknown };
  try {
    body = JSON.parse(err.message);
    meta = JSON.parse(err.detail ?? '');
    if (typeof body !== 'object' || body === null || typeof meta !== 'object' || meta === null)
      throw new Error('not objects');
  } catch {
    return catalogue.raisedUnparseable();
  }
  const status =
    Number.isInteger(meta.status) && (meta.status as number) >= 100 && (meta.status as number) <= 599
      ? (meta.status as number)
      : 500;
  const headers: Record<string, string> = {};
  if (typeof meta.headers === 'object' && meta.headers !== null) {
    for (const [k, v] of Object.entries(meta.headers)) {
      // Only well-formed header names and values; the framing headers stay the server's.
      if (
        typeof v === 'string' &&
        isSendableHeader(k, v) &&
        !['content-length', 'content-type', 'transfer-encoding', 'connection'].includes(k.toLowerCase())
      )
        headers[k] = v;
    }
  }
  return catalogue.raised(
    status,
    text(body.code) ?? '',
    text(body.message) ?? '',
    text(body.details),
    text(body.hint),
    headers,
  );
}

/** How a read past its byte budget fails (query/read.ts, withinBudget), with the bytes counted. */
const BYTE_BUDGET_ERROR = /"pgrst read bytes (\d+) over (\d+)"/;

/**
 * A database error as the client sees it: PostgREST's shape, the SQLSTATE as code, Postgres's
 * message, detail and hint. Messages name tables, columns and constraints (useful to a client),
 * never SQL text.
 */
/**
 * The error with the constraint it names, as Postgres itself gives it. A Citus coordinator
 * passes on an error a worker raised for a shard with its SQLSTATE, message, detail and hint
 * only: the constraint is then read from the message, and an index-backed constraint's shard
 * suffix (as "funds_pkey_102086" of relation "funds_102086") is taken off, so that the
 * deployment's sentence for it applies on every node as on one Postgres.
 */
function withConstraint(err: PgErrorLike): PgErrorLike {
  if (err.constraint_name !== undefined || !err.code.startsWith('23')) return err;
  const constraint = /violates (?:[a-z -]+ )?constraint "(.+?)"/.exec(err.message)?.[1];
  if (constraint === undefined) return err;
  const shard = /(?:relation|table) ".+?_(\d+)"/.exec(err.message)?.[1];
  const suffix = shard === undefined ? undefined : `_${shard}`;
  return {
    ...err,
    constraint_name: suffix && constraint.endsWith(suffix) ? constraint.slice(0, -suffix.length) : constraint,
  };
}

function fromPgError(raw: PgErrorLike, ctx: PgErrorContext): ApiError {
  const err = withConstraint(raw);
  if (err.code === 'PGRST') return raisedError(err);
  const budget = err.code === '22P02' ? BYTE_BUDGET_ERROR.exec(err.message) : null;
  if (budget) return catalogue.responseTooLarge(Number(budget[1]), Number(budget[2]), true);
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
      return catalogue.readOnly(err.message, ctx.readOnlyHint ?? null); // details name the table
    } else if (/row-level security/.test(err.message)) {
      hint ??= ctx.rowSecurityHint ?? null;
    }
  } else if (err.code === '57014') {
    message = 'The query was cancelled because it ran longer than the statement timeout';
    details = `statement timeout: ${ctx.statementTimeoutMs} ms`;
    hint = 'Narrow the request with filters or a smaller limit';
  } else if (ctx.describeConstraint?.(err) !== undefined) {
    // One sentence naming the field, the same on every surface (the deployment's wording, given
    // to createGateway); Postgres's own text stays in details.
    message = ctx.describeConstraint(err)!;
    details = err.constraint_name ? `constraint: ${err.constraint_name}` : err.message;
  } else if (err.code.startsWith('54')) {
    // Postgres's own message says which limit ("target lists can have at most 1664 entries").
    hint = 'The request exceeds a limit of the database: ask for fewer columns, less nesting or fewer rows';
  } else if ((status === 500 && err.code !== '42P17' && !err.code.startsWith('PT')) || status === 503) {
    // Internal states (connection, resources, transaction) say nothing useful to a client;
    // execute.ts logs the original error. A recursion in the definitions (42P17, "infinite
    // recursion detected in policy for relation …") is the schema's to fix, and a function's
    // own RAISE of a PT code says what it means to: their messages stay, as in PostgREST.
    message = status === 503 ? 'The database is not available' : 'The database could not complete the request';
    details = null;
    hint = null;
  }
  if (details === null && err.column_name && (err.code.startsWith('23') || err.code.startsWith('22')))
    details = `column: ${err.column_name}`;
  if (details === null && err.constraint_name && err.code.startsWith('23'))
    details = `constraint: ${err.constraint_name}`;
  return catalogue.database(status, err.code, message, details, hint, headers);
}

// ---- The database unreachable: PostgREST's connection errors --------------------------------

/** postgres.js's codes for a connection that could not be made or was lost. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
]);
const LOST = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
]);
/** admin_shutdown, crash_shutdown, cannot_connect_now: Postgres is stopping or starting. */
const SHUTTING_DOWN = new Set(['57P01', '57P02', '57P03']);

/**
 * Whether the connection is gone: its socket (postgres.js's codes above), or its session, which
 * Postgres ends after an error of severity FATAL or PANIC. An error of severity ERROR leaves the
 * session and its connection as sound as any other, whatever its code: a connection failure
 * (08xxx) reported that way is a node behind the server failing (a Citus worker, a foreign
 * server), and the connection that reported it answers.
 */
export function isConnectionError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return UNREACHABLE.has(code) || LOST.has(code) || (isPgError(err) && (SHUTTING_DOWN.has(code) || sessionEnded(err)));
}

/** The session ended with the error (FATAL, PANIC); without a severity, a connection failure is taken for one. */
const sessionEnded = (err: PgErrorLike): boolean =>
  err.severity === undefined ? err.code.startsWith('08') : err.severity === 'FATAL' || err.severity === 'PANIC';

/**
 * Refusals of a connection as it is made: the login (invalid_authorization_specification,
 * invalid_password), the database's name, too many connections, a server starting up.
 */
const REFUSED_AT_START = /^(28|3D000$|53300$|57P03$)/;

/** The database refused the server's own login (a wrong password, a role that may not log in). */
export const loginRefused = (err: unknown): boolean => isPgError(err) && err.code.startsWith('28');

/** A node behind the database (a Citus worker, a foreign server) could not be reached: reported as an ERROR. */
const nodeUnreachable = (err: PgErrorLike): boolean => err.code.startsWith('08') && !sessionEnded(err);

/**
 * A node of a sharded database (a Citus worker) refused to let the coordinator in as the
 * request's role: a wrong or missing secret of the role for the workers, or their pg_hba.conf.
 * The coordinator reports it as a connection failure (08006) on a connection to Tally that is
 * itself sound, so it is kept; the fault is an operator's to fix, not a database that is away.
 */
const WORKER_LOGIN_REFUSED =
  /^connection to the remote node \S+ failed with the following error: .*(password authentication failed|is not permitted to log in|no password supplied|pg_hba\.conf|authentication failed)/s;
const workerLoginRefused = (err: PgErrorLike): boolean =>
  err.code === '08006' && WORKER_LOGIN_REFUSED.test(err.message);

/**
 * 503 with Retry-After, as PostgREST answers while it has no database: PGRST000 when no
 * connection could be made, PGRST001 when one was lost or Postgres is shutting down. The pool
 * reconnects by itself on the next request; nothing needs a restart.
 */
function connectionError(err: unknown): ApiError {
  const code = (err as { code?: string }).code ?? '';
  return UNREACHABLE.has(code) || (isPgError(err) && REFUSED_AT_START.test(code))
    ? catalogue.couldNotConnect()
    : catalogue.connectionLost();
}

/**
 * The database itself accepts no writes (a hot standby, or default_transaction_read_only):
 * - a write refused as read-only where nothing asked for a read-only transaction (PostgREST's
 *   405 stays for a write inside a read: a volatile function over GET);
 * - on a standby, the unlogged tables of the request checks (rate-limit and sign-in counters)
 *   cannot even be read. Postgres gives that refusal only the generic "not supported" code, so
 *   its message says which one it is.
 */
function databaseReadOnly(err: PgErrorLike, pg?: PgErrorContext): boolean {
  if (err.code === '25006') return !pg?.readOnlyTransaction;
  return err.code === '0A000' && /during recovery/.test(err.message);
}

/**
 * How anything thrown becomes an answer: an ApiError as it is, a lost database a 503, a database
 * error as PostgREST maps it (given the request's context), and anything else a 500 (TLY000)
 * that the caller logs (`unexpected` is then true). Every surface answers errors with it
 * (gateway/errors.ts writeError); a body's refusals are ApiErrors where it is read (gateway/body.ts).
 */
export function toApiError(err: unknown, pg?: PgErrorContext): { error: ApiError; unexpected: boolean } {
  if (err instanceof ApiError) return { error: err, unexpected: false };
  if (isPgError(err) && workerLoginRefused(err)) return { error: catalogue.workerLoginRefused(), unexpected: false };
  if (isPgError(err) && nodeUnreachable(err)) return { error: catalogue.nodeUnreachable(), unexpected: false };
  if (isConnectionError(err)) return { error: connectionError(err), unexpected: false };
  if (isPgError(err) && databaseReadOnly(err, pg)) return { error: catalogue.databaseReadOnly(), unexpected: false };
  if (pg && isPgError(err)) return { error: fromPgError(err, pg), unexpected: false };
  return { error: catalogue.internal(), unexpected: true };
}
