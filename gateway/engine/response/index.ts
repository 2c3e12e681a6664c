// Response shaping (PostgREST's Response): status, Content-Range on every response,
// Content-Type, 206/416, the singular object media type (406 PGRST116), Preference-Applied.

import type { GatewayResponse } from '../call.js';
import { catalogue, type ApiError } from '../errors.js';
import type { MediaType, Preferences } from '../request/types.js';

export const CONTENT_TYPES: Record<MediaType, string> = {
  json: 'application/json; charset=utf-8',
  object: 'application/vnd.pgrst.object+json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

export function contentRange(offset: number, pageTotal: number, total: number | undefined): string {
  const t = total === undefined ? '*' : String(total);
  return pageTotal <= 0 ? `*/${t}` : `${offset}-${offset + pageTotal - 1}/${t}`;
}

export function singularError(rows: number): ApiError {
  return catalogue.singular(rows);
}

export interface ReadResult {
  total: number | undefined;
  pageTotal: number;
  body: string;
}

export function readResponse(
  r: ReadResult,
  offset: number,
  media: MediaType,
  head: boolean,
  prefs: Preferences,
): GatewayResponse {
  if (r.total !== undefined && offset > r.total) {
    throw catalogue.rangeNotSatisfiable(`An offset of ${offset} was requested, but there are only ${r.total} rows.`, {
      'Content-Range': `*/${r.total}`,
    });
  }
  if (media === 'object' && r.pageTotal !== 1) throw singularError(r.pageTotal);
  const status = r.total !== undefined && r.pageTotal < r.total && (offset > 0 || r.pageTotal < r.total) ? 206 : 200;
  const headers: Record<string, string> = {
    'Content-Type': CONTENT_TYPES[media],
    'Content-Range': contentRange(offset, r.pageTotal, r.total),
  };
  if (prefs.count) headers['Preference-Applied'] = `count=${prefs.count}`;
  return { status, headers, body: head ? undefined : r.body };
}

export function preferenceApplied(prefs: Preferences, write: boolean): string | undefined {
  const out: string[] = [];
  if (write && prefs.return) out.push(`return=${prefs.return}`);
  if (prefs.count) out.push(`count=${prefs.count}`);
  if (write && prefs.resolution) out.push(`resolution=${prefs.resolution}`);
  if (write && prefs.missing) out.push(`missing=${prefs.missing}`);
  if (prefs.handling) out.push(`handling=${prefs.handling}`);
  if (write && prefs.handling === 'strict' && prefs.maxAffected !== undefined)
    out.push(`max-affected=${prefs.maxAffected}`);
  if (write && prefs.tx) out.push(`tx=${prefs.tx}`);
  return out.length > 0 ? out.join(', ') : undefined;
}
