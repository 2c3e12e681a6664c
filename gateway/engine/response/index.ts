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

/** Which preferences each kind of request applies (and echoes), as PostgREST's responses do. */
const APPLIES: Record<string, ReadonlySet<string>> = {
  POST: new Set(['resolution', 'missing', 'return', 'count', 'tx', 'handling']),
  PUT: new Set(['return', 'count', 'tx', 'handling']),
  PATCH: new Set(['missing', 'return', 'count', 'tx', 'handling', 'max-affected']),
  DELETE: new Set(['return', 'count', 'tx', 'handling', 'max-affected']),
  RPC: new Set(['count', 'tx', 'handling', 'max-affected']),
};

/**
 * The Preference-Applied header of a write or a call (`kind`: its method, or RPC), in
 * PostgREST's order. `resolved`: the resolution was applied (the table has a conflict target).
 */
export function preferenceApplied(prefs: Preferences, kind: string, resolved = false): string | undefined {
  const applies = APPLIES[kind] ?? new Set<string>();
  const out: string[] = [];
  const add = (name: string, value: string | number | undefined) => {
    if (value !== undefined && applies.has(name)) out.push(`${name}=${value}`);
  };
  if (resolved) add('resolution', prefs.resolution);
  add('missing', prefs.missing);
  add('return', prefs.return);
  add('count', prefs.count);
  add('tx', prefs.tx);
  add('handling', prefs.handling);
  if (prefs.handling === 'strict') add('max-affected', prefs.maxAffected);
  return out.length > 0 ? out.join(', ') : undefined;
}
