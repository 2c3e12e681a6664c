// /rest/v1: the gateway call over HTTP, as PostgREST (and supabase-js) speak it.
// apikey first, then the Bearer JWT (anon without one), the rate limit, then the gateway.
//
// A plain node:http handler, not an Express router: every /rest/v1 request is an apikey, a JWT,
// the rate limit and one gateway call, and Express's per-request work (its request and response
// extensions, the router's layers, middleware around each step) was about a third of a read's
// CPU. The server (server.ts) hands it every request under /rest/v1 before Express sees it,
// through the request shell (http.ts) every surface goes through.

import type { IncomingMessage } from 'node:http';
import { ApiKeys } from '../auth/apikey.js';
import { authenticateRequest } from '../auth/bearer.js';
import { addressRateKey, refuseExhaustedAddress } from '../auth/ratelimit.js';
import { bodyReader } from '../body.js';
import type { AuthContext, GatewayMethod, GatewayRequest } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue, toApiError } from '../errors.js';
import { answerCors, header, queryOf, sendBody, type Exchange, type Handler } from '../http.js';

export const REST_PATH = '/rest/v1';

const METHODS = new Set<GatewayMethod>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const HEADERS = [
  'prefer',
  'accept',
  'range',
  'content-type',
  'accept-profile',
  'content-profile',
  'idempotency-key',
] as const;

/**
 * Answers every request whose path is /rest/v1 or below it. Paths: `/` (the OpenAPI
 * description: Swagger 2.0, or 3.1 by Accept), `/{relation}` and `/rpc/{function}`; anything
 * else is PostgREST's 404.
 */
export function restHandler(ctx: AppContext): Handler {
  const apiKeys = new ApiKeys(ctx.db, ctx.config.publishableKeys);
  // Bodies are read raw, up to the limit, and parsed by the gateway (JSON, form or CSV).
  const readBody = bodyReader(ctx.config.maxBodyBytes);

  const serve = async (x: Exchange, auth: AuthContext) => {
    const { req, res } = x;
    const path = x.path.slice(REST_PATH.length);
    const target = routeOf(path);
    if (target === undefined) throw catalogue.invalidPath();
    const method = (req.method ?? '').toUpperCase() as GatewayMethod;
    // The root is the schema's OpenAPI description (Swagger 2.0, or 3.1 by Accept), GET only.
    if (target === '' && method !== 'GET' && method !== 'HEAD') throw catalogue.invalidPath();
    if (!METHODS.has(method)) throw catalogue.unsupportedMethod(req.method ?? '');
    const hasBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
    const raw = hasBody ? await readBody(req, res) : undefined;
    const response = await x.call(gatewayRequest(req, method, target, path || '/', raw), auth);
    res.statusCode = response.status;
    const { headers } = response;
    for (const name in headers) res.setHeader(name, headers[name]!);
    sendBody(res, response.body);
  };

  // A CORS preflight is answered first (it carries no credentials); then the apikey, the JWT,
  // and the shared rate limit: per workspace token, or per client address when either check
  // failed or there is no token.
  return async (x) => {
    if (answerCors(x.req, x.res)) return;
    try {
      // A key not known yet is looked up for the client's address (its share of the pool), and
      // not at all once the address is over its limit: such a request would be refused anyway.
      const client = {
        poolKey: addressRateKey(x.address),
        beforeLookup: () => refuseExhaustedAddress(ctx, x.address),
      };
      const check = () => apiKeys.check(header(x.req, 'apikey'), client);
      const auth = (x.auth = await authenticateRequest(ctx, x.req, x.res, x.address, check));
      await serve(x, auth);
    } catch (err) {
      if (!x.res.headersSent) x.res.setHeader('Proxy-Status', proxyStatus(err));
      throw err;
    }
  };
}

/**
 * PostgREST's Proxy-Status (RFC 9209) on each error it answers: its name and the error's code,
 * the code the body carries (PGRST…, a SQLSTATE), which newer postgrest-js reads. A code a
 * function raised that a header cannot carry is left out rather than break the answer.
 */
function proxyStatus(err: unknown): string {
  const { code } = toApiError(err).error;
  return /^[\x21-\x7e]+$/.test(code) ? `PostgREST; error=${code}` : 'PostgREST';
}

/**
 * The gateway relation a path below /rest/v1 names: '' for the root, `{relation}` or
 * `rpc/{function}` (one percent-decoded segment each, a trailing slash allowed), or undefined.
 */
function routeOf(path: string): string | undefined {
  let route = routes.get(path);
  if (route === undefined) {
    route = parseRoute(path); // throws for a malformed escape: never kept
    if (path.length > ROUTE_LENGTH) return route;
    if (routes.size >= ROUTES) routes.clear();
    routes.set(path, route ?? NO_ROUTE);
  }
  return route === NO_ROUTE ? undefined : route;
}

/**
 * The routes of the paths asked for last: the same few paths come again and again, and each was
 * split and percent-decoded anew. A route depends on its path alone; the map is emptied when it
 * holds ROUTES, and a path longer than ROUTE_LENGTH is not kept.
 */
const routes = new Map<string, string | typeof NO_ROUTE>();
const NO_ROUTE = Symbol('no route');
const ROUTES = 1_000;
const ROUTE_LENGTH = 256;

function parseRoute(path: string): string | undefined {
  const parts = path.split('/').slice(1);
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length === 0 || (parts.length === 1 && parts[0] === '')) return '';
  if (parts.some((p) => p === '')) return undefined;
  let decoded: string[];
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    throw catalogue.pathEncoding();
  }
  if (decoded.length === 1) return decoded[0];
  if (decoded.length === 2 && parts[0] === 'rpc') return `rpc/${decoded[1]}`;
  return undefined;
}

function gatewayRequest(
  req: IncomingMessage,
  method: GatewayMethod,
  relation: string,
  path: string,
  raw: string | undefined,
): GatewayRequest {
  const headers: Record<string, string | undefined> = {};
  for (const h of HEADERS) headers[h] = header(req, h);
  // The body as sent: the engine parses JSON itself, and writes the client's own text to SQL.
  const body = raw === '' ? undefined : raw;
  // SQL reads the whole request's headers and its path as sent, below /rest/v1, as behind PostgREST.
  return { method, relation, query: queryOf(req), headers, body, http: { headers: req.headers, path } };
}
