// PostgREST's custom errors from SQL: `RAISE SQLSTATE 'PGRST' USING message = '{"code": …,
// "message": …, "details": …, "hint": …}', detail = '{"status": 402, "headers": {…}}'`. The
// function decides the whole response: status, headers and body.

import { ApiError, type PgErrorLike } from './errors.js';

const text = (v: unknown): string | null => (typeof v === 'string' ? v : v === undefined || v === null ? null : JSON.stringify(v));

export function raisedError(err: PgErrorLike): ApiError {
  let body: Record<string, unknown>;
  let meta: { status?: unknown; headers?: unknown };
  try {
    body = JSON.parse(err.message);
    meta = JSON.parse(err.detail ?? '');
    if (typeof body !== 'object' || body === null || typeof meta !== 'object' || meta === null) throw new Error('not objects');
  } catch {
    return new ApiError(500, 'PGRST121', "Could not parse JSON in the RAISE SQLSTATE 'PGRST' error", null,
      'The message must be a JSON object of code, message, details, hint; the detail one of status and headers');
  }
  const status = Number.isInteger(meta.status) && (meta.status as number) >= 100 && (meta.status as number) <= 599 ? meta.status as number : 500;
  const headers: Record<string, string> = {};
  if (typeof meta.headers === 'object' && meta.headers !== null) {
    for (const [k, v] of Object.entries(meta.headers)) {
      // Only well-formed header names and values; the framing headers stay the server's.
      if (/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(k) && typeof v === 'string' && !/[\r\n]/.test(v)
        && !['content-length', 'content-type', 'transfer-encoding', 'connection'].includes(k.toLowerCase())) headers[k] = v;
    }
  }
  return new ApiError(status, text(body.code) ?? '', text(body.message) ?? '', text(body.details), text(body.hint), headers);
}
