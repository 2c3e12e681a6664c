// The one internal interface: every surface turns its request into a GatewayRequest
// and runs it under an AuthContext. /rest/v1 is this call over HTTP; the /api/v1 wrapper and
// the MCP tools build GatewayRequests with their defaults. No surface writes SQL of its own
// against the finance tables.

import type { CompiledSql } from './sql.js';

export type GatewayMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface GatewayRequest {
  method: GatewayMethod;
  /** An exposed schema; the first configured one when absent. */
  schema?: string;
  /**
   * A table or view of the schema, as the client named it (not yet trusted); or 'rpc/{function}'
   * to call a function of the schema (PostgREST's /rpc): GET/HEAD take the arguments from query
   * keys named like its parameters, POST from the JSON object body.
   */
  relation: string;
  /** PostgREST's query grammar: select, order, limit, offset, filters, on_conflict, columns. */
  query: URLSearchParams;
  /** Request headers that shape the call, lower-case names: prefer, accept, range, content-type,
   *  accept-profile, content-profile, idempotency-key. */
  headers: Record<string, string | undefined>;
  /**
   * The body of a write as text (JSON, CSV or form, by its content-type), or a JSON value a
   * surface built. JSON text is parsed by the engine (no key twice) and reaches SQL as the
   * client wrote it, numbers exact; a value reaches it through JSON.stringify.
   */
  body?: unknown;
  /**
   * The HTTP request the surface answers with this call, for SQL to read (request.headers,
   * request.cookies, request.path: request/http-context.ts): its headers as Node read them, and the
   * path it was sent to below the API's root when that is the call's own (/rest/v1). Absent, the
   * call has no headers or cookies and its path is the one /rest/v1 would have for it.
   */
  http?: { headers: HttpHeaders; path?: string };
}

/** Request headers as Node reads them (IncomingMessage.headers): names lower-cased. */
export type HttpHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface AuthContext {
  /** The database role the request runs as (SET LOCAL ROLE). */
  role: string;
  /** The JWT claims, visible to SQL as request.jwt.claims (role, sub, the tenant claim …). */
  claims: Record<string, unknown>;
  /**
   * A statement that completes the caller's authentication inside the request's own
   * transaction, after the pre-request function and before any statement of the request: a
   * credential a surface took on trust is checked again there, whatever the pre-request
   * function is. Its failure fails the request; GatewayResponse.verified says it passed.
   */
  verify?: CompiledSql;
}

/** Time a call waited for a pooled connection and spent in its transaction, in milliseconds. */
export interface GatewayTiming {
  poolMs: number;
  dbMs: number;
}

export interface GatewayResponse {
  status: number;
  headers: Record<string, string>;
  /** The serialised body (JSON text as Postgres produced it, or CSV); undefined for none. */
  body: string | undefined;
  /** The call's database time (for Server-Timing and the request log); an error carries it too (ApiError.timing). */
  timing?: GatewayTiming;
  /** AuthContext.verify ran in the call's transaction and raised nothing. */
  verified?: boolean;
}

/** A gateway call: resolves with the response, rejects with an ApiError for any failure. */
export type GatewayCall = (req: GatewayRequest, auth: AuthContext) => Promise<GatewayResponse>;
