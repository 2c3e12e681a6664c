import type { AuthContext, GatewayCall, GatewayRequest, GatewayResponse } from '../gateway/engine/call.js';
import { oneRow } from '../gateway/engine/invariant.js';
import { MAX_OFFSET } from '../gateway/engine/request/parse.js';

// What an MCP tool says to the gateway: table reads and writes in PostgREST's grammar, under
// the caller's AuthContext. Tools build queries; they never write SQL.

export class ToolError extends Error {}

export interface Page<T> {
  rows: T[];
  limit: number;
  offset: number;
  /** More rows match after this page (one row more than the limit was read). */
  has_more: boolean;
  next_offset: number | null;
  /** Known only on the last page: offset + its rows. Lists never count the whole table. */
  total: number | null;
}

/**
 * Paging without counting: reads limit + 1 rows, so whether another page follows costs one row,
 * not a count over every matching row of the workspace.
 */
export function pageOf<T>(rows: T[], limit: number, offset: number): Page<T> {
  const has_more = rows.length > limit;
  const page = has_more ? rows.slice(0, limit) : rows;
  return {
    rows: page,
    limit,
    offset,
    has_more,
    next_offset: has_more ? offset + limit : null,
    total: has_more ? null : offset + page.length,
  };
}

type Request = Omit<GatewayRequest, 'headers'> & { headers?: GatewayRequest['headers'] };

/**
 * The changes the writes of one tool call made, as each write's own transaction named them
 * (the Tally-Changes and Tally-Activity-Id headers, see sql/169_undo_stack.sql): how many
 * records changed, and the ids of those changes, oldest first.
 */
export interface Changes {
  count: number;
  ids: string[];
}

/** What one answer reports of its changes; undefined for an answer that reports none (a read). */
function reported(headers: Record<string, string>): Changes | undefined {
  const count = headers['Tally-Changes'];
  if (count === undefined) return undefined;
  const ids = headers['Tally-Activity-Id'];
  return { count: Number(count), ids: ids ? ids.split(',').map((id) => id.trim()) : [] };
}
const WRITE_HEADERS = { prefer: 'return=representation', 'content-type': 'application/json' };

export class TableClient {
  /** A POST of this client answered what an earlier call with its idempotency key answered, and wrote nothing. */
  replayed = false;
  private made: Changes | undefined;

  constructor(
    private readonly call: GatewayCall,
    private readonly auth: AuthContext,
    /** The tool call's idempotency_key: the Idempotency-Key of its POSTs. */
    private readonly idempotencyKey?: string,
  ) {}

  /** The request as the gateway takes it, with the call's idempotency key on a POST. */
  private request(req: Request): GatewayRequest {
    const key = req.method === 'POST' ? this.idempotencyKey : undefined;
    return { ...req, headers: { ...req.headers, ...(key === undefined ? {} : { 'idempotency-key': key }) } };
  }

  /** The gateway's answer to `req`, noting a replayed one and what a write reports of its changes. */
  private async send(req: Request): Promise<GatewayResponse> {
    const res = await this.call(this.request(req), this.auth);
    if (res.headers['Idempotent-Replayed'] === 'true') this.replayed = true;
    const changes = reported(res.headers);
    if (changes)
      this.made = { count: (this.made?.count ?? 0) + changes.count, ids: [...(this.made?.ids ?? []), ...changes.ids] };
    return res;
  }

  private async run<T>(req: Request): Promise<T[]> {
    const res = await this.send(req);
    return res.body ? (JSON.parse(res.body) as T[]) : [];
  }

  /** The changes this client's writes made so far; undefined before any write. */
  changes(): Changes | undefined {
    return this.made;
  }

  list<T>(relation: string, query: URLSearchParams): Promise<T[]> {
    return this.run<T>({ method: 'GET', relation, query });
  }

  /** One page of `query` (which sets neither limit nor offset). */
  async page<T>(relation: string, query: URLSearchParams, limit: number, offset: number): Promise<Page<T>> {
    // Past any table a workspace can hold, and past the offsets the engine reads (15 digits):
    // the page is empty, as any offset beyond the last record is.
    if (offset > MAX_OFFSET) return pageOf<T>([], limit, offset);
    query.set('limit', String(limit + 1));
    query.set('offset', String(offset));
    return pageOf(await this.list<T>(relation, query), limit, offset);
  }

  /** Calls a database function over /rpc (POST, named arguments) and answers its JSON result. */
  async rpc<T>(fn: string, args: Record<string, unknown>): Promise<T> {
    const res = await this.send({
      method: 'POST',
      relation: `rpc/${fn}`,
      query: new URLSearchParams(),
      body: args,
      headers: { 'content-type': 'application/json' },
    });
    return JSON.parse(res.body ?? 'null') as T;
  }

  async insert<T>(relation: string, body: Record<string, unknown>, select: string): Promise<T> {
    const rows = await this.run<T>({
      method: 'POST',
      relation,
      query: new URLSearchParams({ select }),
      body,
      headers: WRITE_HEADERS,
    });
    return oneRow(rows, `the insert into ${relation}`);
  }

  /**
   * Inserts the rows in one statement: all of them or, on any error, none. The columns are every
   * key any row has; a row that leaves one out gets the column's default (missing=default).
   */
  insertMany<T>(relation: string, body: Record<string, unknown>[], select: string): Promise<T[]> {
    const columns = [...new Set(body.flatMap((row) => Object.keys(row)))].join(',');
    return this.run<T>({
      method: 'POST',
      relation,
      query: new URLSearchParams({ select, columns }),
      body,
      headers: { ...WRITE_HEADERS, prefer: 'return=representation,missing=default' },
    });
  }

  /** Changes the row with this id; undefined when there is none in the workspace. */
  async update<T>(relation: string, id: string, body: Record<string, unknown>, select: string): Promise<T | undefined> {
    const rows = await this.run<T>({
      method: 'PATCH',
      relation,
      query: new URLSearchParams({ id: `eq.${id}`, select }),
      body,
      headers: WRITE_HEADERS,
    });
    return rows[0];
  }

  /** Deletes the row with this id and returns it; undefined when there is none in the workspace. */
  async remove<T>(relation: string, id: string, select: string): Promise<T | undefined> {
    return (await this.removeWhere<T>(relation, { id }, select))[0];
  }

  /** Deletes the rows whose columns equal these values and returns them. */
  removeWhere<T>(relation: string, equal: Record<string, string>, select: string): Promise<T[]> {
    const query = new URLSearchParams({ select });
    for (const [column, value] of Object.entries(equal)) query.append(column, `eq.${value}`);
    return this.run<T>({ method: 'DELETE', relation, query, headers: { prefer: 'return=representation' } });
  }
}

/**
 * A value inside PostgREST's or=(…) grammar: double-quoted, with backslash escapes, so that
 * commas, dots and parentheses in a search term stay part of the value.
 */
function quoted(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => '\\' + c)}"`;
}

/** A case-insensitive substring pattern for ilike: LIKE's own wildcards in the term are literal. */
function containsPattern(term: string): string {
  return `*${term.replace(/[\\%_*]/g, (c) => '\\' + c)}*`;
}

/** `or=(a.ilike.X,b.ilike.X)`: the term anywhere in any of the columns. */
export function searchFilter(columns: string[], term: string): string {
  const pattern = quoted(containsPattern(term));
  return `(${columns.map((c) => `${c}.ilike.${pattern}`).join(',')})`;
}
