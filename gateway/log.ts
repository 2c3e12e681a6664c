import type { RequestHandler } from 'express';
import type { ServerResponse } from 'node:http';
import { pino } from 'pino';
import type { AuthContext } from './call.js';
import { transactionTimings, type TransactionTiming } from './execute.js';

// One JSON logger for the process (LOG_LEVEL). Log lines name what happened and where, never a
// secret: no token, JWT, apikey, password, query string or request body is ever a field.

// Lines are buffered up to 4 KB and written at least every second, and on exit: one write(2)
// per request was ~8% of a read's CPU under load.
const FLUSH_MS = 1000;
const create = (fd: 1 | 2) => {
  const destination = pino.destination({ dest: fd, sync: false, minLength: 4096 });
  setInterval(() => destination.flush(), FLUSH_MS).unref();
  process.once('exit', () => {
    try {
      destination.flushSync();
    } catch {
      // nothing more can be done at exit
    }
  });
  return pino({
    level: process.env.LOG_LEVEL || 'info',
    base: { service: 'tally' },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, destination);
};

/** The process logger; a live binding, so logToStderr() reaches every module that imported it. */
export let log = create(1);

/** For `tally mcp` on stdio, where standard output carries only JSON-RPC. */
export function logToStderr(): void {
  log = create(2);
}

/**
 * The request log: method, route (the path without its query string, which may carry
 * ?token=), status, duration and the workspace of the caller when known.
 */
export function requestLog(): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const auth = res.locals.auth as AuthContext | undefined;
      const workspace = auth?.claims?.workspace_id;
      const timing = auth ? transactionTimings.get(auth) : undefined;
      log.info({
        method: req.method,
        route: req.baseUrl + req.path,
        status: res.statusCode,
        duration_ms: Number(process.hrtime.bigint() - start) / 1e6,
        db_ms: timing?.dbMs,
        workspace_id: typeof workspace === 'string' ? workspace : undefined,
      }, 'request');
    });
    next();
  };
}

/**
 * What of an unexpected error goes to the log: its type, code, message and stack. Not the
 * whole object: a driver error can carry the statement's parameters.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { error: String(err) };
  const code = (err as { code?: unknown }).code;
  return { error: { type: err.name, code: typeof code === 'string' ? code : undefined, message: err.message, stack: err.stack } };
}

/** The Server-Timing value: waiting for a pooled connection, then the database transactions. */
function serverTimingValue(t: TransactionTiming): string {
  return `pool;dur=${t.poolMs.toFixed(2)}, db;dur=${t.dbMs.toFixed(2)}`;
}

/**
 * A `Server-Timing` header on every response that ran a database transaction (any surface):
 * set at the last moment, when the status and headers are written.
 */
export function serverTiming(): RequestHandler {
  return (_req, res, next) => {
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
      const auth = res.locals.auth as AuthContext | undefined;
      const timing = auth ? transactionTimings.get(auth) : undefined;
      if (timing && !res.headersSent) res.setHeader('Server-Timing', serverTimingValue(timing));
      return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof res.writeHead;
    next();
  };
}
