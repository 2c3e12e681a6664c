// PostgREST's custom errors from SQL: `RAISE SQLSTATE 'PGRST' USING message = '{"code": …,
// "message": …, "details": …, "hint": …}', detail = '{"status": 402, "headers": {…}}'`. The
// function decides the whole response: status, headers and body.

import { catalogue, type ApiError } from './errors/catalogue.js';
import { isSendableHeader } from './query/settings.js';

const text = (v: unknown): string | null =>
  typeof v === 'string' ? v : v === undefined || v === null ? null : JSON.stringify(v);

export function raisedError(err: { message: string; detail?: string }): ApiError {
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
