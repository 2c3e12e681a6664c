// What SQL may read of the HTTP request behind a call, as PostgREST sets it in every request's
// transaction: request.headers (a JSON object of the headers, names lower-cased, Cookie left
// out), request.cookies (a JSON object of the Cookie header's pairs), request.method and
// request.path (the path below the API's root, as sent: `/rpc/get_guc_value`). Functions, the
// pre-request function and row-level security policies read them with
// current_setting('request.headers', true)::json ->> 'x-…'.
//
// Every value here is the client's and untrusted: it reaches Postgres only as a parameter of the
// transaction's setup statement (execute.ts). The headers that carry credentials (CREDENTIALS)
// are left out, unlike PostgREST: a database that logs statements with their parameters
// (log_statement, log_min_duration_statement) would log every caller's bearer token and apikey.
// Who the caller is, SQL reads in request.jwt.claims.

import type { GatewayRequest, HttpHeaders } from '../call.js';
import { routineName } from './parse.js';

/** The four values, as the setup statement sets them. */
export interface HttpContext {
  headers: string;
  cookies: string;
  method: string;
  path: string;
}

const NONE = '{}';

/** Headers of credentials, never sent to the database: a bearer token, a proxy's, a publishable key. */
const CREDENTIALS: ReadonlySet<string> = new Set(['authorization', 'proxy-authorization', 'apikey']);

/**
 * The settings of a call. Without an HTTP request (a surface that has none, such as an MCP tool
 * call) there are no headers or cookies; the method is always the call's, and the path, unless
 * the surface gives the one it was sent to, the call's own path below /rest/v1.
 */
export function httpContext(req: GatewayRequest): HttpContext {
  const http = req.http;
  return {
    headers: http ? headersJson(http.headers) : NONE,
    cookies: http ? cookiesJson(http.headers.cookie) : NONE,
    method: req.method,
    path: http?.path ?? pathOf(req.relation),
  };
}

/**
 * The headers as one JSON object, without the Cookie header (request.cookies) and the
 * credentials. Node has already lower-cased the names and made a header sent twice one value
 * (joined with ", ", or the first for a header that takes one value, such as Content-Type); an
 * array (Set-Cookie) is joined the same way. A header named `__proto__` is a key like any other
 * (defined, not assigned). The object is a plain one: JSON.stringify of an object without a
 * prototype, which V8 keeps as a dictionary, cost twice as much, on every request.
 */
function headersJson(headers: HttpHeaders): string {
  const json = headersJsonAs(headers, asSent);
  // Bytes past ASCII are rare: the headers are read as UTF-8 (textOf) only when the JSON holds one.
  return isAscii(json) ? json : headersJsonAs(headers, textOf);
}

function headersJsonAs(headers: HttpHeaders, text: (value: string) => string): string {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (name === 'cookie' || CREDENTIALS.has(name) || value === undefined) continue;
    const read = text(typeof value === 'string' ? value : value.join(', '));
    if (name === '__proto__') Object.defineProperty(out, name, { value: read, enumerable: true, writable: true });
    else out[name] = read;
  }
  return JSON.stringify(out);
}

const asSent = (value: string): string => value;
// eslint-disable-next-line no-control-regex
const isAscii = (text: string): boolean => /^[\x00-\x7f]*$/.test(text);

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header's text as PostgREST reads it: its bytes as UTF-8 (Node reads each byte as a Latin-1
 * character, so `café` sent as UTF-8 arrives as `cafÃ©`); bytes that are not UTF-8 stay Latin-1.
 */
function textOf(value: string): string {
  if (isAscii(value)) return value;
  try {
    return UTF8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return value;
  }
}

/**
 * The Cookie header's `name=value` pairs as PostgREST reads them: split at `;`, leading spaces
 * dropped, the name up to the first `=`, the value as sent (neither unquoted nor decoded); a
 * name given twice keeps its last value. Pairs without a name are left out.
 */
function cookiesJson(header: string | string[] | undefined): string {
  if (header === undefined || header === '') return NONE;
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const part of textOf(typeof header === 'string' ? header : header.join('; ')).split(';')) {
    const pair = part.replace(/^ +/, '');
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    if (name !== '') out[name] = eq < 0 ? '' : pair.slice(eq + 1);
  }
  return JSON.stringify(out);
}

/** The path /rest/v1 would have been sent for the same call: `/{relation}`, `/rpc/{function}`, `/`. */
function pathOf(relation: string): string {
  const fn = routineName(relation);
  return fn === undefined ? `/${encodeURIComponent(relation)}` : `/rpc/${encodeURIComponent(fn)}`;
}
