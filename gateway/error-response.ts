import type { ServerResponse } from 'node:http';
import { toClientError } from './errors.js';
import { errorFields, log } from './log.js';

/**
 * Answers anything thrown in the one error shape, on every surface: an ApiError as it is, a
 * database or body-parser failure as its 4xx/5xx, anything unexpected a logged 500. A response
 * already under way cannot change its status: it is left as it is.
 */
export function writeError(res: ServerResponse, err: unknown): void {
  const { error, unexpected } = toClientError(err);
  if (unexpected) log.error(errorFields(err), 'unexpected error');
  if (res.headersSent) return;
  const body = JSON.stringify(error.body());
  res.statusCode = error.status;
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
