// Optimistic concurrency on /api/v1: GET /{resource}/{id} answers an ETag, a digest of the
// record's row as Postgres writes it (select=*), and a PATCH or DELETE with If-Match runs only
// while the record is still the one the client read. The check is the write's own filter: the
// statement also compares every scalar column with the value read, so a change that lands
// between the read and the write leaves it no row, and it writes nothing.

import { createHash } from 'node:crypto';

type Row = Record<string, unknown>;

/** The strong ETag of a row: the same row, the same tag, on any server. */
export const etagOf = (row: Row): string => `"${createHash('sha256').update(JSON.stringify(row)).digest('base64url')}"`;

/** If-Match (RFC 9110): `*`, or a list of tags compared strongly (a weak tag never matches). */
export function matches(ifMatch: string, etag: string): boolean {
  const tags = ifMatch.split(',').map((t) => t.trim());
  return tags.includes('*') || tags.includes(etag);
}

/**
 * Filters in PostgREST's grammar that hold only while the row is as read: each scalar column
 * equal to its value, or null. A JSON value (an object or an array) is left to the ETag check.
 */
export function unchangedFilters(row: Row, except: string[]): [string, string][] {
  const filters: [string, string][] = [];
  for (const [column, value] of Object.entries(row)) {
    if (except.includes(column)) continue;
    if (value === null) filters.push([column, 'is.null']);
    else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      filters.push([column, `eq.${String(value)}`]);
  }
  return filters;
}
