import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import type { AuthContext, GatewayCall, GatewayMethod, GatewayRequest, GatewayResponse } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue, type ApiError } from '../engine/errors.js';
import type { LookupCache } from '../lookups.js';
import { bearerAuth } from '../auth/bearer.js';
import { limitAfter, rateLimit } from '../auth/ratelimit.js';
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
import { schemasFor, validateBody } from './validate.js';
import { oneRow } from '../engine/invariant.js';

// The REST wrapper /api/v1: each route builds one GatewayRequest with the
// wrapper's defaults and answers with what the gateway answers. No SQL and no filtering of its
// own: a client's select/order/limit/offset and PostgREST filters are forwarded as they are,
// so a list here equals the same query on /rest/v1. Bodies are validated before the gateway
// (validate.ts), so a 400 writes nothing. Postgres (grants, RLS) decides everything else.

const BASE = '/api/v1';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The gateway's headers a wrapper client may read. */
const PASSED_HEADERS = ['content-type', 'content-range', 'preference-applied'];

/** The wrapper needs a JWT: no Authorization header is a 401 here, not the anon role. */
function requireJwt(ctx: AppContext): RequestHandler {
  const bearer = bearerAuth(ctx);
  return (req, res, next) => {
    if (req.headers.authorization === undefined) {
      return next(
        catalogue.noCredential(
          'Authorization required: send "Authorization: Bearer <access token>"',
          'Exchange a workspace token for an access token at POST /api/v1/token first',
          { 'WWW-Authenticate': 'Bearer realm="tally"' },
        ),
      );
    }
    return bearer(req, res, next);
  };
}

/** The client's query string as the gateway's grammar wants it: repeated keys kept, in order. */
function clientQuery(req: Request): URLSearchParams {
  const i = req.originalUrl.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : req.originalUrl.slice(i + 1));
}

function withDefaults(query: URLSearchParams, defaults: Record<string, string>): URLSearchParams {
  for (const [key, value] of Object.entries(defaults)) if (!query.has(key)) query.set(key, value);
  return query;
}

const auth = (res: Response): AuthContext => res.locals.auth as AuthContext;

const notFound = (resource: Pick<Resource, 'noun' | 'path'>, id: string): ApiError =>
  catalogue.recordNotFound(resource.noun, id, `/api/v1/${resource.path}`);

/** The record id of a path; anything that is not a UUID names no record. */
function recordId(req: Request, resource: Pick<Resource, 'noun' | 'path'>): string {
  const id = String(req.params.id);
  if (!UUID.test(id)) throw notFound(resource, id);
  return id.toLowerCase();
}

function rows<T = Record<string, unknown>>(g: GatewayResponse): T[] {
  const parsed: unknown = g.body ? JSON.parse(g.body) : [];
  return Array.isArray(parsed) ? (parsed as T[]) : [parsed as T];
}

/** A gateway answer as it is: status, the headers a client may read, the JSON text. */
function passThrough(res: Response, g: GatewayResponse): void {
  for (const name of PASSED_HEADERS) {
    const value = g.headers[name] ?? g.headers[name.replace(/(^|-)[a-z]/g, (c) => c.toUpperCase())];
    if (value !== undefined) res.set(name, value);
  }
  // Postgres's JSON text, written as it is (no ETag hashed over it, as res.send would).
  const body = g.body ?? '[]';
  res.status(g.status).type(res.get('content-type') ?? 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export function wrapperRouter(ctx: AppContext, call: GatewayCall, lookups: LookupCache): Router {
  const router = Router();
  const json = express.json({ limit: ctx.config.maxBodyBytes, strict: false });

  /** One gateway call under the request's auth. */
  function gateway(
    res: Response,
    req: Omit<GatewayRequest, 'headers'> & { headers?: GatewayRequest['headers'] },
  ): Promise<GatewayResponse> {
    return call({ headers: {}, ...req }, auth(res));
  }

  const handle =
    (fn: (req: Request, res: Response) => Promise<void>): RequestHandler =>
    (req, res, next) => {
      fn(req, res).catch(next);
    };

  // The description is public (no workspace data), counted per address like any anonymous call.
  const describe = handle(async (req, res) => {
    const origin = `${req.protocol}://${req.get('host') ?? 'localhost'}`;
    res
      .set('Cache-Control', 'no-cache')
      .json(
        openApiDocument(schemasFor(await lookups.get()).schemas, `${origin}${BASE}`, ctx.config.rateLimitPerMinute),
      );
  });
  router.get([`${BASE}/openapi.json`, '/openapi.json'], rateLimit(ctx), describe);
  router.use(`${BASE}/docs`, ...docsHandlers(`${BASE}/openapi.json`));

  const api = Router();
  router.use(BASE, limitAfter(ctx, requireJwt(ctx)), api);

  for (const resource of RESOURCES) {
    const collection = `/${resource.path}`;
    const member = `/${resource.path}/:id`;

    api.get(
      collection,
      handle(async (req, res) => {
        const query = withDefaults(clientQuery(req), resource.listDefaults);
        // fund_id=<uuid> (the documented shorthand of this one filter) is read as fund_id=eq.<uuid>.
        const fundId = query.get('fund_id');
        if (resource.path === 'fund_transactions' && fundId !== null && UUID.test(fundId))
          query.set('fund_id', `eq.${fundId}`);
        const headers: GatewayRequest['headers'] = { prefer: req.get('prefer'), range: req.get('range') };
        const g = await gateway(res, { method: 'GET', relation: resource.relation, query, headers });
        passThrough(res, g);
      }),
    );

    if (resource.path !== 'funds') {
      api.get(
        member,
        handle(async (req, res) => {
          const id = recordId(req, resource);
          const g = await gateway(res, {
            method: 'GET',
            relation: resource.relation,
            query: new URLSearchParams({ select: '*', id: `eq.${id}` }),
          });
          const [row] = rows(g);
          if (!row) throw notFound(resource, id);
          res.json(row);
        }),
      );
    }

    const { create, update } = resource;
    if (create) {
      api.post(
        collection,
        json,
        handle(async (req, res) => {
          const body = validateBody(schemasFor(await lookups.get()), create, req.body);
          const g = await gateway(res, {
            method: 'POST',
            relation: resource.relation,
            query: new URLSearchParams({ select: '*' }),
            body,
            headers: { prefer: 'return=representation', 'content-type': 'application/json' },
          });
          const row = oneRow(rows<{ id: string }>(g), 'the created record');
          res.status(201).location(`${BASE}/${resource.path}/${row.id}`).json(row);
        }),
      );
    }
    if (update) {
      api.patch(
        member,
        json,
        handle(async (req, res) => {
          const id = recordId(req, resource);
          const body = validateBody(schemasFor(await lookups.get()), update, req.body);
          const row = await write(res, 'PATCH', resource, id, body);
          res.json(row);
        }),
      );
    }
    if (resource.remove) {
      api.delete(
        member,
        handle(async (req, res) => {
          const row = await write(res, 'DELETE', resource, recordId(req, resource));
          res.json(row);
        }),
      );
    }
  }

  /** PATCH or DELETE of one record by id: the changed (or deleted) record, or 404. */
  async function write(
    res: Response,
    method: GatewayMethod,
    resource: Resource,
    id: string,
    body?: Record<string, unknown>,
  ): Promise<unknown> {
    const g = await gateway(res, {
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
  api.get(
    '/funds/:id',
    handle(async (req, res) => {
      const id = recordId(req, fund);
      const query = new URLSearchParams({ ...FUND_DETAIL_QUERY, id: `eq.${id}` });
      // The figures are the function's (GET /rpc/fund_summary), so they equal what MCP and /rest/v1/rpc say.
      const [g, s] = await Promise.all([
        gateway(res, { method: 'GET', relation: 'funds', query }),
        gateway(res, {
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
      res.json({
        ...rest,
        balance: summary.balance,
        summary,
        participants: joins.map((p) => ({ ...p.contacts, joined_at: p.joined_at })),
      });
    }),
  );

  api.get(
    '/categories',
    handle(async (req, res) => {
      const query = new URLSearchParams(CATEGORY_QUERY);
      const domain = clientQuery(req).get('domain');
      if (domain !== null) {
        const flag = CATEGORY_DOMAINS[domain];
        if (!flag) throw catalogue.notOneOf('domain', Object.keys(CATEGORY_DOMAINS));
        query.set(flag, 'is.true');
      }
      const g = await gateway(res, { method: 'GET', relation: 'categories', query });
      res.json(rows(g));
    }),
  );

  api.get(
    '/payment_methods',
    handle(async (_req, res) => {
      const g = await gateway(res, {
        method: 'GET',
        relation: 'payment_methods',
        query: new URLSearchParams(PAYMENT_METHOD_QUERY),
      });
      res.json(rows(g));
    }),
  );

  return router;
}
