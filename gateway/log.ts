import type { RequestHandler } from 'express';
import { pino } from 'pino';

// One JSON logger for the process (LOG_LEVEL). Log lines name what happened and where, never a
// secret: no token, JWT, apikey, password, query string or request body is ever a field.

const create = (fd: 1 | 2) => pino({
  level: process.env.LOG_LEVEL || 'info',
  base: { service: 'tally' },
  timestamp: pino.stdTimeFunctions.isoTime,
}, pino.destination({ dest: fd, sync: false }));

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
      const auth = res.locals.auth as { claims?: { workspace_id?: unknown } } | undefined;
      const workspace = auth?.claims?.workspace_id;
      log.info({
        method: req.method,
        route: req.baseUrl + req.path,
        status: res.statusCode,
        duration_ms: Number(process.hrtime.bigint() - start) / 1e6,
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
