import type { RequestHandler } from 'express';
import type { ServerResponse } from 'node:http';
import type { AuthContext } from './engine/call.js';
import { transactionTimings, type TransactionTiming } from './engine/execute.js';
import { log } from './engine/log.js';

// The HTTP request log and Server-Timing, built on the engine's process logger, which is
// re-exported here for the server's own modules.

export { errorFields, log, logToStderr } from './engine/log.js';

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
      log.info(
        {
          method: req.method,
          route: req.baseUrl + req.path,
          status: res.statusCode,
          duration_ms: Number(process.hrtime.bigint() - start) / 1e6,
          db_ms: timing?.dbMs,
          workspace_id: typeof workspace === 'string' ? workspace : undefined,
        },
        'request',
      );
    });
    next();
  };
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
