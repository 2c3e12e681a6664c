import { Router, type RequestHandler } from 'express';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { AuthContext, GatewayCall, GatewayMethod, GatewayRequest, GatewayResponse } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue, type ApiError } from '../errors.js';
import type { LookupCache } from '../lookups.js';
import { clientAddress } from '../auth/address.js';
import { authenticateRequest } from '../auth/bearer.js';
import { limitRequest, rateLimit } from '../auth/ratelimit.js';
import {
  answerCors,
  bodyReader,
  header,
  isJson,
  parseJson,
  pathOf,
  queryOf,
  sendBody,
  sendJson,
  serveRequest,
} from '../http.js';
import { docsHandlers } from './docs.js';
import { openApiDocument } from './openapi.js';
import {
  CATEGORY_DOMAINS,
  CATEGORY_QUERY,
  FUND_DETAIL_QUERY,
  FUND_SUMMARY_RELATION,
  FUND_SUMMARY_SELECT,
  PAYMENT_METHOD_QUERY,
  RESOURCES,
  type Resource,
} from './resources.js';
import { findRoute, route, segmentsOf, type Route } from './routes.js';
import { schemasFor, validateBody } from './validate.js';
import type { RequestSchemaName } from './schemas.js';
import { oneRow } from '../engine/invariant.js';

// The REST wrapper /api/v1: each route builds one GatewayRequest with the
// wrapper's defaults and answers with what the gateway answers. No SQL and no filtering of its
// own: a client's select/order/limit/offset and PostgREST filters are forwarded as they are,
// so a list here equals the same query on /rest/v1. Bodies are validated before the gateway
// (validate.ts), so a 400 writes nothing. Postgres (grants, RLS) decides everything else.
//
// A plain node:http handler with a route table of its own (routes.ts), not an Express router:
// Express's per-request work (its request and response extensions, router layers, the
// middleware around each step) was a third of a list's CPU. The server (server.ts) hands it
// every request under /api/v1 before Express sees it; the two paths it does not answer itself
// it hands on to Express (EXPRESS below). Every other request needs a JWT, even one for a path
// that does not exist.

const BASE = '/api/v1';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The gateway's headers a wrapper client may read: as sent, and as the gateway may spell them. */
const PASSED_HEADERS = ['content-type', 'content-range', 'preference-applied'].map(
  (name) => [name, name.replace(/(^|-)[a-z]/g, (ch) => ch.toUpperCase())] as const,
);

/**
 * The requests under /api/v1 that Express answers: the token exchange (POST /api/v1/token,
 * auth/exchange.ts, which authenticates with a workspace token, not a JWT) and the reference
 * page and its assets (/api/v1/docs, Swagger UI's Express handlers), both without a JWT.
 */
function forExpress(method: string, segments: string[]): boolean {
  const [first = '', ...more] = segments;
  const name = first.toLowerCase();
  return name === 'docs' || (name === 'token' && more.length === 0 && method === 'POST');
}

/** What a route's handler gets: the request, its path parameters, and the caller. */
interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  params: string[];
  auth: AuthContext;
}
type Handler = (c: Call) => Promise<void>;

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
function requireJwt(req: IncomingMessage): void {
  if (req.headers.authorization === undefined) {
    throw catalogue.noCredential(
      'Authorization required: send "Authorization: Bearer <access token>"',
      'Exchange a workspace token for an access token at POST /api/v1/token first',
      { 'WWW-Authenticate': 'Bearer realm="tally"' },
    );
  }
}

function withDefaults(query: URLSearchParams, defaults: Record<string, string>): URLSearchParams {
  for (const [key, value] of Object.entries(defaults)) if (!query.has(key)) query.set(key, value);
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
    if (value !== undefined) c.res.setHeader(name, value);
  }
  if (!c.res.hasHeader('content-type')) c.res.setHeader('Content-Type', 'application/json; charset=utf-8');
  c.res.statusCode = g.status;
  sendBody(c.res, c.auth, g.body ?? '[]');
}

/**
 * The live OpenAPI document, public (no workspace data): at /api/v1/openapi.json here and at
 * /openapi.json on Express (wrapperExpressRoutes). The caller counted it against the limit.
 */
function describer(ctx: AppContext, lookups: LookupCache) {
  return async (_req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const doc = openApiDocument(
      schemasFor(await lookups.get()).schemas,
      // A path, not the Host header's origin: a document that echoed a client's Host would
      // hand the next reader of a cached copy that client's server.
      BASE,
      ctx.config.rateLimitPerMinute,
    );
    res.setHeader('Cache-Control', 'no-cache');
    sendJson(res, undefined, 200, doc);
  };
}

/** The wrapper's routes on Express: /openapi.json (the document outside /api/v1) and the reference page. */
export function wrapperExpressRoutes(ctx: AppContext, lookups: LookupCache): Router {
  const router = Router();
  const describe = describer(ctx, lookups);
  router.get('/openapi.json', rateLimit(ctx), ((req, res, next) => {
    describe(req, res).catch(next);
  }) as RequestHandler);
  router.use(`${BASE}/docs`, ...docsHandlers(`${BASE}/openapi.json`));
  return router;
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

/** Answers every request under /api/v1; `express` is the rest of the server, for forExpress's. */
export function wrapperHandler(
  ctx: AppContext,
  call: GatewayCall,
  lookups: LookupCache,
  trustProxy: boolean,
  express: RequestListener,
): RequestListener {
  const readBody = bodyReader(ctx.config.maxBodyBytes);
  const describe = describer(ctx, lookups);

  /** One gateway call under the request's auth. */
  const gateway = (
    c: Call,
    req: Omit<GatewayRequest, 'headers'> & { headers?: GatewayRequest['headers'] },
  ): Promise<GatewayResponse> => call({ headers: {}, ...req }, c.auth);

  /**
   * A JSON body checked against a request schema, and its text as sent: the gateway writes that
   * text, so a number reaches Postgres exactly as the client wrote it (validation sees its
   * double). Without a Content-Type the body is read as JSON, as PostgREST reads it; another
   * type is a 415 that says how to send JSON (`curl -d` alone sends form data), where it was
   * once taken for a missing body. None, or one that is not JSON, is the 400 that names it.
   */
  const jsonBody = async (c: Call, schema: RequestSchemaName): Promise<string> => {
    const type = header(c.req, 'content-type');
    if (type !== undefined && !isJson(type)) {
      throw catalogue.unsupportedContentType(
        type,
        'Send the body as JSON with "Content-Type: application/json" (curl: -H "Content-Type: application/json")',
      );
    }
    const raw = await readBody(c.req, c.res);
    const value = raw === undefined || raw === '' ? undefined : parseJson(raw);
    validateBody(schemasFor(await lookups.get()), schema, value);
    return raw!;
  };

  const routes: Route<Handler>[] = [];

  for (const resource of RESOURCES) {
    const collection = `/${resource.path}`;
    const member = `/${resource.path}/:id`;

    routes.push(
      route('GET', collection, async (c) => {
        const query = withDefaults(queryOf(c.req), resource.listDefaults);
        // fund_id=<uuid> (the documented shorthand of this one filter) is read as fund_id=eq.<uuid>.
        const fundId = query.get('fund_id');
        if (resource.path === 'fund_transactions' && fundId !== null && UUID.test(fundId))
          query.set('fund_id', `eq.${fundId}`);
        const headers: GatewayRequest['headers'] = { prefer: header(c.req, 'prefer'), range: header(c.req, 'range') };
        passThrough(c, await gateway(c, { method: 'GET', relation: resource.relation, query, headers }));
      }),
    );

    if (resource.path !== 'funds') {
      routes.push(
        route('GET', member, async (c) => {
          const id = recordId(c, resource);
          const g = await gateway(c, {
            method: 'GET',
            relation: resource.relation,
            query: new URLSearchParams({ select: '*', id: `eq.${id}` }),
          });
          const [row] = rows(g);
          if (!row) throw notFound(resource, id);
          sendJson(c.res, c.auth, 200, row);
        }),
      );
    }

    const { create, update } = resource;
    if (create) {
      routes.push(
        route('POST', collection, async (c) => {
          const body = await jsonBody(c, create);
          const g = await gateway(c, {
            method: 'POST',
            relation: resource.relation,
            query: new URLSearchParams({ select: '*' }),
            body,
            headers: { prefer: 'return=representation', 'content-type': 'application/json' },
          });
          const row = oneRow(rows<{ id: string }>(g), 'the created record');
          c.res.setHeader('Location', `${BASE}/${resource.path}/${encodeURIComponent(row.id)}`);
          sendJson(c.res, c.auth, 201, row);
        }),
      );
    }
    if (update) {
      routes.push(
        route('PATCH', member, async (c) => {
          const id = recordId(c, resource);
          const body = await jsonBody(c, update);
          sendJson(c.res, c.auth, 200, await write(c, 'PATCH', resource, id, body));
        }),
      );
    }
    if (resource.remove) {
      routes.push(
        route('DELETE', member, async (c) => {
          sendJson(c.res, c.auth, 200, await write(c, 'DELETE', resource, recordId(c, resource)));
        }),
      );
    }
  }

  /** PATCH or DELETE of one record by id: the changed (or deleted) record, or 404. */
  async function write(
    c: Call,
    method: GatewayMethod,
    resource: Resource,
    id: string,
    body?: string,
  ): Promise<unknown> {
    const g = await gateway(c, {
      method,
      relation: resource.relation,
      query: new URLSearchParams({ select: '*', id: `eq.${id}` }),
      body,
      headers: body
        ? { prefer: 'return=representation', 'content-type': 'application/json' }
        : { prefer: 'return=representation' },
    });
    const [row] = rows(g);
    if (!row) throw notFound(resource, id);
    return row;
  }

  const fund = RESOURCES.find((r) => r.path === 'funds')!;
  routes.push(
    route('GET', '/funds/:id', async (c) => {
      const id = recordId(c, fund);
      const query = new URLSearchParams({ ...FUND_DETAIL_QUERY, id: `eq.${id}` });
      // The figures are the function's (GET /rpc/fund_summary), so they equal what MCP and /rest/v1/rpc say.
      const [g, s] = await Promise.all([
        gateway(c, { method: 'GET', relation: 'funds', query }),
        gateway(c, {
          method: 'GET',
          relation: FUND_SUMMARY_RELATION,
          query: new URLSearchParams({ fund_id: id, select: FUND_SUMMARY_SELECT }),
        }),
      ]);
      const [row] = rows<
        Record<string, unknown> & { fund_participants?: { joined_at: string; contacts: Record<string, unknown> }[] }
      >(g);
      if (!row) throw notFound(fund, id);
      const { fund_participants: joins = [], ...rest } = row;
      const summary = JSON.parse(s.body ?? 'null') as { balance: number } & Record<string, unknown>;
      sendJson(c.res, c.auth, 200, {
        ...rest,
        balance: summary.balance,
        summary,
        participants: joins.map((p) => ({ ...p.contacts, joined_at: p.joined_at })),
      });
    }),
  );

  routes.push(
    route('GET', '/categories', async (c) => {
      const query = new URLSearchParams(CATEGORY_QUERY);
      const domain = queryOf(c.req).get('domain');
      if (domain !== null) {
        const flag = CATEGORY_DOMAINS[domain];
        if (!flag) throw catalogue.notOneOf('domain', Object.keys(CATEGORY_DOMAINS));
        query.set(flag, 'is.true');
      }
      sendJson(c.res, c.auth, 200, rows(await gateway(c, { method: 'GET', relation: 'categories', query })));
    }),
  );

  routes.push(
    route('GET', '/payment_methods', async (c) => {
      const query = new URLSearchParams(PAYMENT_METHOD_QUERY);
      sendJson(c.res, c.auth, 200, rows(await gateway(c, { method: 'GET', relation: 'payment_methods', query })));
    }),
  );

  // The document is public, counted per address like any anonymous call.
  const publicRoutes = [route('GET', '/openapi.json', describe)];

  return (req, res) => {
    const method = req.method ?? '';
    const segments = segmentsOf(pathOf(req).slice(BASE.length));
    if (answerCors(req, res)) return;
    if (forExpress(method, segments)) return express(req, res);
    serveRequest(req, res, async (_path, caller) => {
      const address = clientAddress(req, trustProxy);
      const open = findRoute(publicRoutes, method, segments);
      if (open) {
        await limitRequest(ctx, res, undefined, address);
        return open.handler(req, res);
      }
      // The exchange answers POST only, with a workspace token: any other method there is told
      // so before it is taken for a request that needs an access token.
      if (segments.length === 1 && segments[0]!.toLowerCase() === 'token') {
        throw catalogue.unsupportedMethod(method, ['POST'], EXCHANGE_HINT);
      }
      caller.auth = onWrapper(await authenticateRequest(ctx, req, res, address, () => requireJwt(req)));
      const found = findRoute(routes, method, segments);
      if (!found) throw notRouted(routes, method, segments);
      await found.handler({ req, res, params: found.params, auth: caller.auth });
    });
  };
}
