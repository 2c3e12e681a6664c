import type { AuthContext, GatewayMethod, GatewayRequest, GatewayResponse } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue, type ApiError } from '../errors.js';
import type { LookupCache } from '../lookups.js';
import { authenticateRequest } from '../auth/bearer.js';
import { limitRequest } from '../auth/ratelimit.js';
import { tokenExchange } from '../auth/exchange.js';
import { bodyReader, isJson, parseJson, type BodyReader } from '../body.js';
import { answerCors, header, queryOf, sendBody, sendJson, type Exchange, type Handler } from '../http.js';
import { openApiDocument } from './openapi.js';
import { LOOKUP_LISTS, RESOURCES, type LookupList, type Resource } from './resources.js';
import { findRoute, route, segmentsOf, type Route } from './routes.js';
import { schemasFor, validateBody } from './validate.js';
import type { RequestSchemaName } from './schemas.js';
import { oneRow } from '../engine/invariant.js';
import { etagOf, matches, unchangedFilters } from './etag.js';

// The REST wrapper /api/v1: each route builds one GatewayRequest with the
// wrapper's defaults and answers with what the gateway answers. No SQL and no filtering of its
// own: a client's select/order/limit/offset and PostgREST filters are forwarded as they are,
// so a list here equals the same query on /rest/v1. Bodies are validated before the gateway
// (validate.ts), so a 400 writes nothing. Postgres (grants, RLS) decides everything else.
//
// A plain node:http handler with a route table of its own (routes.ts), as every surface programs
// call is (surfaces.ts). The server hands it every request under /api/v1 but the reference page
// (/api/v1/docs, a page on Express). Two routes need no JWT: the OpenAPI document and the token
// exchange (POST /api/v1/token, auth/exchange.ts, which takes a workspace token); every other
// request needs one, even one for a path that does not exist.

export const WRAPPER_PATH = '/api/v1';
const BASE = WRAPPER_PATH;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The gateway's headers a wrapper client may read: as sent, and as the gateway may spell them. */
const PASSED_HEADERS = ['content-type', 'content-range', 'preference-applied'].map(
  (name) => [name, name.replace(/(^|-)[a-z]/g, (ch) => ch.toUpperCase())] as const,
);

/** What a route's handler gets: the request (its Exchange), its path parameters, and the caller. */
interface Call {
  x: Exchange;
  params: string[];
  auth: AuthContext;
}
type RouteHandler = (c: Call) => Promise<void>;

/**
 * The caller's auth with `surface: "api"` in its claims, so that the activity log says a change
 * came through /api/v1. The claims are kept per claims object (one per access token), so a
 * token's claims statement is still made once; the auth itself is the request's own.
 */
const wrapperClaims = new WeakMap<object, Record<string, unknown>>();
function onWrapper(auth: AuthContext): AuthContext {
  let claims = wrapperClaims.get(auth.claims);
  if (!claims) wrapperClaims.set(auth.claims, (claims = { ...auth.claims, surface: 'api' }));
  return { ...auth, claims };
}

/** The wrapper needs a JWT: no Authorization header is a 401 here, not the anon role. */
function requireJwt(x: Exchange): void {
  if (x.req.headers.authorization === undefined) {
    throw catalogue.noCredential(
      'Authorization required: send "Authorization: Bearer <access token>"',
      'Exchange a workspace token for an access token at POST /api/v1/token first',
      { 'WWW-Authenticate': 'Bearer realm="tally"' },
    );
  }
}

/**
 * One gateway call under the request's auth, its database time counted for the request. A POST
 * carries the client's Idempotency-Key: the engine answers a repeat with the first answer,
 * which the route then shapes the same way.
 */
const gateway = async (
  c: Call,
  req: Omit<GatewayRequest, 'headers'> & { headers?: GatewayRequest['headers'] },
): Promise<GatewayResponse> => {
  const key = req.method === 'POST' ? header(c.x.req, 'idempotency-key') : undefined;
  const headers = { ...req.headers, 'idempotency-key': key };
  // SQL reads the wrapper request's headers and cookies, and the call's own method and path.
  const g = await c.x.call({ ...req, headers, http: { headers: c.x.req.headers } }, c.auth);
  // A replay says so; a write names the changes it made (sql/169_undo_stack.sql).
  for (const name of CALL_HEADERS) {
    const value = g.headers[name];
    if (value !== undefined) c.x.res.setHeader(name, value);
  }
  return g;
};

/** The headers of any gateway call's answer that the wrapper's answer carries too. */
const CALL_HEADERS = ['Idempotent-Replayed', 'Tally-Changes', 'Tally-Activity-Id', 'Tally-Request-Id'];

/** The rows of a GET, for a resource's detail (resources.ts Fetch). */
const fetchFor =
  (c: Call) =>
  async (relation: string, query: URLSearchParams): Promise<Record<string, unknown>[]> =>
    rows(await gateway(c, { method: 'GET', relation, query }));

/** A list's query: the client's, with the resource's defaults and its filters' shorthands. */
function listQuery(c: Call, resource: Resource): URLSearchParams {
  const query = queryOf(c.x.req);
  for (const [key, value] of Object.entries(resource.listDefaults)) if (!query.has(key)) query.set(key, value);
  for (const filter of resource.filters) {
    const value = query.get(filter.name);
    if (filter.bareUuid && value !== null && UUID.test(value)) query.set(filter.name, `eq.${value}`);
    if (filter.plain && value !== null) {
      query.delete(filter.name);
      query.append(filter.plain.column, `${filter.plain.operator}.${value}`);
    }
  }
  return query;
}

const notFound = (resource: Pick<Resource, 'noun' | 'path'>, id: string): ApiError =>
  catalogue.recordNotFound(resource.noun, id, `/api/v1/${resource.path}`);

/** The record id of a path; anything that is not a UUID names no record. */
function recordId(c: Call, resource: Pick<Resource, 'noun' | 'path'>): string {
  const [id = ''] = c.params;
  if (!UUID.test(id)) throw notFound(resource, id);
  return id.toLowerCase();
}

function rows<T = Record<string, unknown>>(g: GatewayResponse): T[] {
  const parsed: unknown = g.body ? JSON.parse(g.body) : [];
  return Array.isArray(parsed) ? (parsed as T[]) : [parsed as T];
}

/** A gateway answer as it is: status, the headers a client may read, Postgres's JSON text. */
function passThrough(c: Call, g: GatewayResponse): void {
  for (const [name, canonical] of PASSED_HEADERS) {
    const value = g.headers[name] ?? g.headers[canonical];
    if (value !== undefined) c.x.res.setHeader(name, value);
  }
  if (!c.x.res.hasHeader('content-type')) c.x.res.setHeader('Content-Type', 'application/json; charset=utf-8');
  c.x.res.statusCode = g.status;
  sendBody(c.x.res, g.body ?? '[]');
}

/**
 * The live OpenAPI document, public (no workspace data): at /api/v1/openapi.json and at
 * /openapi.json (openApiHandler), counted per address like any anonymous call.
 */
function describer(ctx: AppContext, lookups: LookupCache) {
  return async (x: Exchange): Promise<void> => {
    await limitRequest(ctx, x.res, undefined, x.address);
    const doc = openApiDocument(
      schemasFor(await lookups.get()).schemas,
      // A path, not the Host header's origin: a document that echoed a client's Host would
      // hand the next reader of a cached copy that client's server.
      BASE,
      ctx.config.rateLimitPerMinute,
    );
    x.res.setHeader('Cache-Control', 'no-cache');
    sendJson(x.res, 200, doc);
  };
}

/** /openapi.json, the document outside /api/v1: GET only, no path below it. */
export function openApiHandler(ctx: AppContext, lookups: LookupCache): Handler {
  const describe = describer(ctx, lookups);
  return (x) => {
    const below = x.path.slice('/openapi.json'.length);
    if ((x.req.method !== 'GET' && x.req.method !== 'HEAD') || (below !== '' && below !== '/'))
      throw catalogue.invalidPath('GET / lists what this server serves');
    return describe(x);
  };
}

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

const EXCHANGE_HINT = 'POST a workspace token to /api/v1/token to get an access token';

/** Names a client may guess for a resource, and the resource they mean. */
const ALIASES: Record<string, string> = {
  expenses: 'personal_transactions',
  expense: 'personal_transactions',
  transactions: 'fund_transactions',
  fund: 'funds',
  contact: 'contacts',
  members: 'contacts',
  methods: 'payment_methods',
};

/**
 * The answer to a request no route takes: 405 with the methods the path has (and, for a change
 * of a whole collection, that it takes a record's id), or 404 naming the resources there are.
 */
function notRouted<H>(routes: Route<H>[], method: string, segments: string[]): ApiError {
  const served = new Set(routes.filter((r) => findRoute([r], r.method, segments)).map((r) => r.method));
  if (served.has('GET')) served.add('HEAD');
  const allowed = METHOD_ORDER.filter((m) => served.has(m));
  if (allowed.length > 0) {
    const collection = segments.length === 1;
    const oneRecord = routes.some(
      (r) => r.method === method && r.segments.length === 2 && r.segments[0] === segments[0],
    );
    const hint =
      collection && oneRecord
        ? `${method} changes one record: ${BASE}/${segments[0]}/{id} (the ids are in GET ${BASE}/${segments[0]}?select=id)`
        : `${BASE}/${segments.join('/')} answers ${allowed.join(', ')}`;
    return catalogue.unsupportedMethod(method, allowed, hint);
  }
  const names = [...new Set(routes.map((r) => r.segments[0]!))];
  const meant = ALIASES[(segments[0] ?? '').toLowerCase()];
  return catalogue.invalidPath(
    `${meant ? `Did you mean ${BASE}/${meant}? ` : ''}The resources under ${BASE}: ${names.join(', ')} (described in ${BASE}/openapi.json)`,
  );
}

/**
 * A JSON body checked against a request schema, and its text as sent: the gateway writes that
 * text, so a number reaches Postgres exactly as the client wrote it (validation sees its
 * double). Without a Content-Type the body is read as JSON, as PostgREST reads it; another
 * type is a 415 that says how to send JSON (`curl -d` alone sends form data), where it was
 * once taken for a missing body. None, or one that is not JSON, is the 400 that names it.
 */
async function jsonBody(c: Call, read: BodyReader, lookups: LookupCache, schema: RequestSchemaName): Promise<string> {
  const type = header(c.x.req, 'content-type');
  if (type !== undefined && !isJson(type)) {
    throw catalogue.unsupportedContentType(
      type,
      'Send the body as JSON with "Content-Type: application/json" (curl: -H "Content-Type: application/json")',
    );
  }
  const raw = await read(c.x.req, c.x.res);
  const value = raw === undefined || raw === '' ? undefined : parseJson(raw);
  validateBody(schemasFor(await lookups.get()), schema, value);
  return raw!;
}

/** A request's checked JSON body for a request schema. */
type BodyOf = (c: Call, schema: RequestSchemaName) => Promise<string>;

const RETURN_ROW = { prefer: 'return=representation', 'content-type': 'application/json' };

/** The routes of one resource (resources.ts): a list, one record, and the writes it offers. */
function resourceRoutes(resource: Resource, bodyOf: BodyOf): Route<RouteHandler>[] {
  const { path, relation, create, update, detail } = resource;
  const collection = `/${path}`;
  const member = `/${path}/:id`;
  const list: RouteHandler = async (c) => {
    const headers = { prefer: header(c.x.req, 'prefer'), range: header(c.x.req, 'range') };
    passThrough(c, await gateway(c, { method: 'GET', relation, query: listQuery(c, resource), headers }));
  };
  const one: RouteHandler = async (c) => {
    const id = recordId(c, resource);
    const [row, stored] = await Promise.all([
      detail ? detail.read(fetchFor(c), id) : undefined,
      readOne(c, resource, id),
    ]);
    if (!stored) throw notFound(resource, id);
    // The ETag is the row's, also where the answer is more (a fund's detail): If-Match of a
    // PATCH or DELETE compares the row.
    c.x.res.setHeader('ETag', etagOf(stored));
    sendJson(c.x.res, 200, row ?? stored);
  };
  const routes = [route('GET', collection, list), route('GET', member, one)];
  if (create)
    routes.push(
      route('POST', collection, async (c) => {
        const body = await bodyOf(c, create);
        const query = new URLSearchParams({ select: '*' });
        const g = await gateway(c, { method: 'POST', relation, query, body, headers: RETURN_ROW });
        const row = oneRow(rows<{ id: string }>(g), 'the created record');
        c.x.res.setHeader('Location', `${BASE}/${path}/${encodeURIComponent(row.id)}`);
        sendJson(c.x.res, 201, row);
      }),
    );
  if (update)
    routes.push(
      route('PATCH', member, async (c) => {
        const id = recordId(c, resource);
        sendJson(c.x.res, 200, await changeOne(c, 'PATCH', resource, id, await bodyOf(c, update)));
      }),
    );
  if (resource.remove)
    routes.push(
      route('DELETE', member, async (c) =>
        sendJson(c.x.res, 200, await changeOne(c, 'DELETE', resource, recordId(c, resource))),
      ),
    );
  for (const action of resource.collectionActions ?? [])
    routes.push(
      route('POST', `${collection}/${action.name}`, async (c) => {
        const body = await bodyOf(c, action.request);
        const headers = { 'content-type': 'application/json' };
        passThrough(
          c,
          await gateway(c, {
            method: 'POST',
            relation: `rpc/${action.routine}`,
            query: new URLSearchParams(),
            body,
            headers,
          }),
        );
      }),
    );
  for (const action of resource.actions ?? [])
    routes.push(
      route('POST', `${member}/${action.name}`, async (c) => {
        const body = { [action.argument]: recordId(c, resource) };
        const headers = { 'content-type': 'application/json' };
        const g = await gateway(c, {
          method: 'POST',
          relation: `rpc/${action.routine}`,
          query: new URLSearchParams(),
          body,
          headers,
        });
        passThrough(c, g);
      }),
    );
  return routes;
}

/** PATCH or DELETE of one record by id: the changed (or deleted) record, or 404. */
async function changeOne(
  c: Call,
  method: GatewayMethod,
  resource: Resource,
  id: string,
  body?: string,
): Promise<unknown> {
  const query = new URLSearchParams({ select: '*', id: `eq.${id}` });
  const ifMatch = header(c.x.req, 'if-match');
  const changed = () => catalogue.recordChanged(resource.noun, id, `${BASE}/${resource.path}/${id}`);
  if (ifMatch !== undefined) {
    const current = await readOne(c, resource, id);
    if (!current) throw notFound(resource, id);
    if (!matches(ifMatch, etagOf(current))) throw changed();
    for (const [column, filter] of unchangedFilters(current, ['id'])) query.append(column, filter);
  }
  const headers = body ? RETURN_ROW : { prefer: 'return=representation' };
  const [row] = rows(await gateway(c, { method, relation: resource.relation, query, body, headers }));
  if (!row) throw ifMatch === undefined ? notFound(resource, id) : changed();
  if (method === 'PATCH') c.x.res.setHeader('ETag', etagOf(row));
  return row;
}

/** A record's row as the table holds it (select=*), or undefined. */
async function readOne(c: Call, resource: Resource, id: string): Promise<Record<string, unknown> | undefined> {
  const query = new URLSearchParams({ select: '*', id: `eq.${id}` });
  return rows(await gateway(c, { method: 'GET', relation: resource.relation, query }))[0];
}

/** GET /{path} of a live lookup list: its fixed query, narrowed by its choice parameter. */
function lookupRoute({ path, query: fixed, choice }: LookupList): Route<RouteHandler> {
  return route('GET', `/${path}`, async (c) => {
    const query = new URLSearchParams(fixed);
    const chosen = choice && queryOf(c.x.req).get(choice.param);
    if (choice && chosen !== null && chosen !== undefined) {
      // Own keys only: 'constructor' or 'toString' is a member of every object, not a choice.
      const flag = Object.hasOwn(choice.flags, chosen) ? choice.flags[chosen] : undefined;
      if (!flag) throw catalogue.notOneOf(choice.param, Object.keys(choice.flags));
      query.set(flag, 'is.true');
    }
    sendJson(c.x.res, 200, rows(await gateway(c, { method: 'GET', relation: path, query })));
  });
}

/** Answers every request under /api/v1 (but /api/v1/docs, surfaces.ts). */
export function wrapperHandler(ctx: AppContext, lookups: LookupCache): Handler {
  const read = bodyReader(ctx.config.maxBodyBytes);
  const bodyOf: BodyOf = (c, schema) => jsonBody(c, read, lookups, schema);
  const routes = [...RESOURCES.flatMap((r) => resourceRoutes(r, bodyOf)), ...LOOKUP_LISTS.map(lookupRoute)];
  // The routes that need no JWT: the OpenAPI document, and the exchange that makes one.
  const publicRoutes = [
    route('GET', '/openapi.json', describer(ctx, lookups)),
    route('POST', '/token', tokenExchange(ctx)),
  ];

  return async (x) => {
    const method = x.req.method ?? '';
    const segments = segmentsOf(x.path.slice(BASE.length));
    if (answerCors(x.req, x.res)) return;
    const open = findRoute(publicRoutes, method, segments);
    if (open) return open.handler(x);
    // The exchange answers POST only, with a workspace token: any other method there is told
    // so before it is taken for a request that needs an access token.
    if (segments.length === 1 && segments[0]!.toLowerCase() === 'token') {
      throw catalogue.unsupportedMethod(method, ['POST'], EXCHANGE_HINT);
    }
    const auth = onWrapper(await authenticateRequest(ctx, x.req, x.res, x.address, () => requireJwt(x)));
    x.auth = auth;
    const found = findRoute(routes, method, segments);
    if (!found) throw notRouted(routes, method, segments);
    await found.handler({ x, params: found.params, auth });
  };
}
