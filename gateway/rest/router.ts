// /rest/v1: the gateway call over HTTP, as PostgREST (and supabase-js) speak it.
// apikey first, then the Bearer JWT (anon without one), then the gateway.

import express, { type Request, type Router } from 'express';
import { ApiKeys } from '../auth/apikey.js';
import { bearerAuth } from '../auth/bearer.js';
import { limitAfter } from '../auth/ratelimit.js';
import type { AuthContext, GatewayCall, GatewayMethod, GatewayRequest } from '../call.js';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';
import { requestSchema } from '../gateway.js';
import { openApiDocument } from './openapi.js';

const METHODS = new Set<GatewayMethod>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const HEADERS = ['prefer', 'accept', 'range', 'content-type', 'accept-profile', 'content-profile'];

export function restRouter(ctx: AppContext, call: GatewayCall): Router {
  const apiKeys = new ApiKeys(ctx.db, ctx.config.publishableKeys);
  const router = express.Router();

  // apikey, then the JWT; then the shared rate limit (issue 5): per workspace token, or per
  // client address when either check failed or there is no token.
  const bearer = bearerAuth(ctx);
  router.use(limitAfter(ctx, async (req, res, next) => {
    try {
      await apiKeys.check(req.header('apikey') ?? undefined);
    } catch (err) {
      return next(err);
    }
    return bearer(req, res, next);
  }));
  // Bodies are read raw, up to the limit, and parsed by the gateway (JSON, form or CSV).
  router.use(express.text({ type: () => true, limit: ctx.config.maxBodyBytes }));

  router.get('/', async (req, res, next) => {
    try {
      const schema = requestSchema(ctx, { method: 'GET', relation: '', query: new URLSearchParams(), headers: { 'accept-profile': req.header('accept-profile') } });
      const doc = await openApiDocument(ctx, res.locals.auth as AuthContext, schema);
      res.status(200).type('application/openapi+json; charset=utf-8').send(JSON.stringify(doc));
    } catch (err) {
      next(err);
    }
  });

  // /rpc/{function}: the gateway call with relation 'rpc/{function}' (see call.ts).
  router.all(['/rpc/:function', '/:relation'], async (req, res, next) => {
    try {
      const method = req.method.toUpperCase() as GatewayMethod;
      if (!METHODS.has(method)) throw new ApiError(405, 'PGRST117', `Unsupported HTTP method: ${req.method}`);
      const response = await call(gatewayRequest(req, method), res.locals.auth as AuthContext);
      res.status(response.status).set(response.headers);
      if (response.body === undefined || method === 'HEAD') res.end();
      else {
        // The body is JSON (or CSV) text as Postgres serialised it: written as it is, with no
        // ETag hashed over it (res.send would) and no conversion beyond the one encoding.
        res.setHeader('Content-Length', Buffer.byteLength(response.body));
        res.end(response.body);
      }
    } catch (err) {
      next(err);
    }
  });
  return router;
}

function gatewayRequest(req: Request, method: GatewayMethod): GatewayRequest {
  const q = req.originalUrl.indexOf('?');
  const headers: Record<string, string | undefined> = {};
  for (const h of HEADERS) headers[h] = req.header(h) ?? undefined;
  const hasBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
  const raw = typeof req.body === 'string' ? req.body : undefined;
  let body: unknown;
  if (hasBody && raw !== undefined && raw !== '') {
    const type = (headers['content-type'] ?? 'application/json').split(';')[0].trim().toLowerCase();
    if (type === 'application/json' || type.endsWith('+json')) {
      try {
        body = JSON.parse(raw);
      } catch (err) {
        throw new ApiError(400, 'PGRST102', 'Empty or invalid json', err instanceof Error ? err.message : null, 'Send a valid JSON object or array');
      }
    } else body = raw;
  }
  return {
    method,
    relation: req.params.function !== undefined ? `rpc/${req.params.function as string}` : req.params.relation as string,
    query: new URLSearchParams(q >= 0 ? req.originalUrl.slice(q + 1) : ''),
    headers,
    body,
  };
}
