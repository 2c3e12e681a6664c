import type { AuthContext, GatewayCall, GatewayRequest } from '../gateway/call.js';

// What an MCP tool says to the gateway: table reads and writes in PostgREST's grammar, under
// the caller's AuthContext. Tools build queries; they never write SQL.

export class ToolError extends Error {}

export interface Page<T> {
  rows: T[];
  /** The total count of matching rows (Prefer: count=exact), when asked for. */
  total: number | undefined;
}

/** Content-Range "0-19/123" (or "*\/0") → 123. */
function totalOf(contentRange: string | undefined): number | undefined {
  const m = /\/(\d+)$/.exec(contentRange ?? '');
  return m ? Number(m[1]) : undefined;
}

export class TableClient {
  constructor(private readonly call: GatewayCall, private readonly auth: AuthContext) {}

  private async run<T>(req: Omit<GatewayRequest, 'headers'> & { headers?: GatewayRequest['headers'] }): Promise<{ rows: T[]; total?: number }> {
    const res = await this.call({ headers: {}, ...req }, this.auth);
    const rows = res.body ? (JSON.parse(res.body) as T[]) : [];
    return { rows, total: totalOf(res.headers['content-range'] ?? res.headers['Content-Range']) };
  }

  async list<T>(relation: string, query: URLSearchParams, options: { count?: boolean } = {}): Promise<Page<T>> {
    const { rows, total } = await this.run<T>({
      method: 'GET', relation, query, headers: options.count ? { prefer: 'count=exact' } : {},
    });
    return { rows, total };
  }

  async insert<T>(relation: string, body: Record<string, unknown>, select: string): Promise<T> {
    const { rows } = await this.run<T>({
      method: 'POST', relation, query: new URLSearchParams({ select }), body, headers: { prefer: 'return=representation', 'content-type': 'application/json' },
    });
    return rows[0];
  }

  /** Changes the row with this id; undefined when there is none in the workspace. */
  async update<T>(relation: string, id: string, body: Record<string, unknown>, select: string): Promise<T | undefined> {
    const { rows } = await this.run<T>({
      method: 'PATCH', relation, query: new URLSearchParams({ id: `eq.${id}`, select }), body,
      headers: { prefer: 'return=representation', 'content-type': 'application/json' },
    });
    return rows[0];
  }

  /** Deletes the row with this id and returns it; undefined when there is none in the workspace. */
  async remove<T>(relation: string, id: string, select: string): Promise<T | undefined> {
    const { rows } = await this.run<T>({
      method: 'DELETE', relation, query: new URLSearchParams({ id: `eq.${id}`, select }), headers: { prefer: 'return=representation' },
    });
    return rows[0];
  }
}

/**
 * A value inside PostgREST's or=(…) grammar: double-quoted, with backslash escapes, so that
 * commas, dots and parentheses in a search term stay part of the value.
 */
export function quoted(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => '\\' + c)}"`;
}

/** A case-insensitive substring pattern for ilike: LIKE's own wildcards in the term are literal. */
export function containsPattern(term: string): string {
  return `*${term.replace(/[\\%_*]/g, (c) => '\\' + c)}*`;
}

/** `or=(a.ilike.X,b.ilike.X)`: the term anywhere in any of the columns. */
export function searchFilter(columns: string[], term: string): string {
  const pattern = quoted(containsPattern(term));
  return `(${columns.map((c) => `${c}.ilike.${pattern}`).join(',')})`;
}
