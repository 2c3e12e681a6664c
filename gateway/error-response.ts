import type { ServerResponse } from 'node:http';
import { toApiError } from './engine/errors.js';
import { errorFields, log } from './log.js';

/**
 * Answers anything thrown in the one error shape, on every surface: an ApiError as it is (a
 * body's refusals are made as ApiErrors where it is read, body.ts), a lost database a 503,
 * anything unexpected a logged 500. A response already under way cannot change its status: it
 * is left as it is.
 */
export function writeError(res: ServerResponse, err: unknown): void {
  const { error, unexpected } = toApiError(err);
  if (unexpected) log.error(errorFields(err), 'unexpected error');
  if (res.headersSent) return;
  const body = JSON.stringify(error.body());
  res.statusCode = error.status;
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
