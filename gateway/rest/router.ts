// /rest/v1: the gateway call over HTTP, as PostgREST (and supabase-js) speak it.
// apikey first, then the Bearer JWT (anon without one), then the gateway.

import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { ApiKeys } from '../auth/apikey.js';
import { bearerAuth } from '../auth/bearer.js';
import { limitAfter } from '../auth/ratelimit.js';
import type { AuthContext, GatewayCall, GatewayMethod, GatewayRequest } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue } from '../engine/errors.js';
import { requestSchema } from '../engine/gateway.js';
import { openApiDocument } from './openapi.js';

const METHODS = new Set<GatewayMethod>(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const HEADERS = ['prefer', 'accept', 'range', 'content-type', 'accept-profile', 'content-profile'];

/**
 * One handler, not a Router: every /rest/v1 request is an apikey, a JWT, the rate limit and one
 * gateway call, and walking a router's layers (path matching, a body parser that finds no body)
 * was a measurable share of a read's CPU. Paths: `/` (the OpenAPI description),
 * `/{relation}` and `/rpc/{function}`; anything else falls through to the 404.
 */
export function restRouter(ctx: AppContext, call: GatewayCall): RequestHandler {
  const apiKeys = new ApiKeys(ctx.db, ctx.config.publishableKeys);

  // apikey, then the JWT; then the shared rate limit: per workspace token, or per client
  // address when either check failed or there is no token.
  const bearer = bearerAuth(ctx);
  const authenticate = limitAfter(ctx, async (req, res, next) => {
    try {
      await apiKeys.check(req.header('apikey') ?? undefined);
    } catch (err) {
      return next(err);
    }
    return bearer(req, res, next);
  });
  // Bodies are read raw, up to the limit, and parsed by the gateway (JSON, form or CSV).
  const readBody = express.text({ type: () => true, limit: ctx.config.maxBodyBytes });

  const describe = async (req: Request, res: Response): Promise<void> => {
    const schema = requestSchema(ctx, {
      method: 'GET',
      relation: '',
      query: new URLSearchParams(),
      headers: { 'accept-profile': req.header('accept-profile') },
    });
    const doc = await openApiDocument(ctx, res.locals.auth as AuthContext, schema);
    res.status(200).type('application/openapi+json; charset=utf-8').send(JSON.stringify(doc));
  };

  const serve = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      const target = routeOf(req.path);
      if (target === undefined) return next();
      const method = req.method.toUpperCase() as GatewayMethod;
      if (target === '') return method === 'GET' || method === 'HEAD' ? describe(req, res) : next();
      if (!METHODS.has(method)) throw catalogue.unsupportedMethod(req.method);
      const response = await call(gatewayRequest(req, method, target), res.locals.auth as AuthContext);
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
  };

  return (req, res, next) => {
    authenticate(req, res, (authError?: unknown) => {
      if (authError !== undefined && authError !== null) return next(authError);
      const method = req.method.toUpperCase();
      if (method !== 'POST' && method !== 'PUT' && method !== 'PATCH') return void serve(req, res, next);
      readBody(req, res, (bodyError?: unknown) =>
        bodyError !== undefined && bodyError !== null ? next(bodyError) : void serve(req, res, next),
      );
    });
  };
}

/**
 * The gateway relation a path below /rest/v1 names: '' for the root, `{relation}` or
 * `rpc/{function}` (one percent-decoded segment each, a trailing slash allowed), or undefined.
 */
function routeOf(path: string): string | undefined {
  const parts = path.split('/').slice(1);
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length === 1 && parts[0] === '') return '';
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

function gatewayRequest(req: Request, method: GatewayMethod, relation: string): GatewayRequest {
  const q = req.originalUrl.indexOf('?');
  const headers: Record<string, string | undefined> = {};
  for (const h of HEADERS) headers[h] = req.header(h) ?? undefined;
  const hasBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
  const raw = typeof req.body === 'string' ? req.body : undefined;
  let body: unknown;
  if (hasBody && raw !== undefined && raw !== '') {
    const [mediaType = ''] = (headers['content-type'] ?? 'application/json').split(';');
    const type = mediaType.trim().toLowerCase();
    if (type === 'application/json' || type.endsWith('+json')) {
      try {
        body = JSON.parse(raw);
      } catch (err) {
        throw catalogue.invalidBody(
          'empty or invalid JSON',
          err instanceof Error ? err.message : null,
          'Send a valid JSON object or array',
        );
      }
    } else body = raw;
  }
  return {
    method,
    relation,
    query: new URLSearchParams(q >= 0 ? req.originalUrl.slice(q + 1) : ''),
    headers,
    body,
  };
}
