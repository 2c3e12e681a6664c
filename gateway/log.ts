import type { RequestHandler } from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext, GatewayCall, GatewayTiming } from './engine/call.js';
import { ApiError } from './engine/errors.js';
import { log } from './engine/log.js';

// The HTTP request log and Server-Timing, built on the engine's process logger, which is
// re-exported here for the server's own modules. Every surface gets both: the Express ones
// through the middlewares below, /rest/v1 and /api/v1 (plain node:http handlers) through
// http.ts serveRequest and sendBody.

export { errorFields, log, logToStderr, setLogLevel } from './engine/log.js';

/**
 * Database time per request, added up from the timing of each of its gateway calls
 * (GatewayResponse.timing, ApiError.timing): keyed by the request's AuthContext, which its
 * authentication step makes afresh for every request and every surface passes down unchanged.
 */
const requestTimings = new WeakMap<AuthContext, GatewayTiming>();

function addTiming(auth: AuthContext, timing: GatewayTiming | undefined): void {
  if (timing === undefined) return;
  const t = requestTimings.get(auth);
  if (t) {
    t.poolMs += timing.poolMs;
    t.dbMs += timing.dbMs;
  } else requestTimings.set(auth, { ...timing });
}

/** The gateway call with the database time of each call counted for its request's Server-Timing and log line. */
export function timedCall(call: GatewayCall): GatewayCall {
  return async (req, auth) => {
    try {
      const res = await call(req, auth);
      addTiming(auth, res.timing);
      return res;
    } catch (err) {
      if (err instanceof ApiError) addTiming(auth, err.timing);
      throw err;
    }
  };
}

/**
 * The request log line: method, route (the path without its query string, which may carry
 * ?token=), status, duration and the workspace of the caller when known. `start` is
 * process.hrtime.bigint() when the request arrived.
 */
export function logRequest(
  req: IncomingMessage,
  route: string,
  status: number,
  start: bigint,
  auth: AuthContext | undefined,
): void {
  const workspace = auth?.claims?.workspace_id;
  log.info(
    {
      method: req.method,
      route,
      status,
      duration_ms: Number(process.hrtime.bigint() - start) / 1e6,
      db_ms: auth ? requestTimings.get(auth)?.dbMs : undefined,
      workspace_id: typeof workspace === 'string' ? workspace : undefined,
    },
    'request',
  );
}

/** The request log of the Express surfaces (their authentication step sets res.locals.auth). */
export function requestLog(): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => logRequest(req, req.baseUrl + req.path, res.statusCode, start, res.locals.auth));
    next();
  };
}

/**
 * The Server-Timing value of a request that ran database transactions: waiting for a pooled
 * connection, then the transactions; undefined for one that ran none.
 */
export function serverTimingOf(auth: AuthContext | undefined): string | undefined {
  const t = auth ? requestTimings.get(auth) : undefined;
  return t ? `pool;dur=${t.poolMs.toFixed(2)}, db;dur=${t.dbMs.toFixed(2)}` : undefined;
}

/**
 * A `Server-Timing` header on every response of an Express surface that ran a database
 * transaction: set at the last moment, when the status and headers are written.
 */
export function serverTiming(): RequestHandler {
  return (_req, res, next) => {
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
      const timing = serverTimingOf(res.locals.auth as AuthContext | undefined);
      if (timing && !res.headersSent) res.setHeader('Server-Timing', timing);
      return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof res.writeHead;
    next();
  };
}
