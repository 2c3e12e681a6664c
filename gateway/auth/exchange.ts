import { Router, type Request } from 'express';
import { optionalJsonReader } from '../body.js';
import { exchangeOf } from '../http.js';
import type { AppContext } from '../context.js';
import { catalogue } from '../engine/errors.js';
import { ACCESS_TOKEN_TTL_SECONDS, signAccessToken } from './jwt.js';
import { authenticateWorkspaceRequest, oneWorkspaceToken, roleForScope } from './workspace-token.js';
import { emptyBearer, isEmptyBearer } from './bearer.js';
import { group } from '../engine/invariant.js';

// The token exchange: a workspace token in, a one-hour access
// token (JWT) out. Served at POST /api/v1/token and POST /functions/v1/api-token.
//
// The checks are MCP's (authenticateWorkspaceRequest): the failed-authentication limit per
// address, the lookup (401 unknown/revoked), the request limit keyed by the token, the API
// switch (403); then the JWT.

const EXCHANGE_PATHS = ['/api/v1/token', '/functions/v1/api-token'];

/**
 * The workspace token of an exchange request, from one of three places: the
 * Authorization header as a bearer value, the x-api-token header, the JSON body's `token`.
 * Clients of a functions host often put a platform key of their own into Authorization and
 * the workspace token elsewhere, so a value that is not a workspace token there gives way to
 * one in the other places. Two different workspace tokens are refused rather than guessed at.
 */
function presentedToken(req: Request): string | undefined {
  const candidates: string[] = [];
  const authorization = req.headers.authorization;
  if (authorization !== undefined && !isEmptyBearer(authorization)) {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    candidates.push(m ? group(m, 1) : authorization);
  }
  const header = req.headers['x-api-token'];
  if (typeof header === 'string') candidates.push(header.trim());
  const body: unknown = req.body;
  if (body !== undefined && body !== null) {
    if (typeof body !== 'object' || Array.isArray(body)) {
      throw catalogue.invalidBody(
        'Invalid request body: the body must be a JSON object',
        null,
        'Send {"token": "tally_ws_…"} or no body',
      );
    }
    const token = (body as Record<string, unknown>).token;
    if (token !== undefined && token !== null) {
      if (typeof token !== 'string')
        throw catalogue.invalidBody('Invalid request body: the body field "token" must be a string');
      candidates.push(token.trim());
    }
  }
  // No value at all after an empty bearer: said as such rather than as a missing token.
  const presented = oneWorkspaceToken(candidates);
  if (presented === undefined && authorization !== undefined && isEmptyBearer(authorization)) throw emptyBearer();
  return presented;
}

export function exchangeRouter(ctx: AppContext): Router {
  const router = Router();
  // The body is optional: only a JSON content type is read (body.ts); malformed JSON is a 400 in
  // the error shape.
  const readJson = optionalJsonReader(Math.min(ctx.config.maxBodyBytes, 64 * 1024));

  router.post(EXCHANGE_PATHS, async (req, res, next) => {
    try {
      const x = exchangeOf(req);
      req.body = await readJson(req, res);
      const { token } = await authenticateWorkspaceRequest(ctx, res, x.address, () => presentedToken(req), {
        identified: (auth) => (x.auth = auth), // for the request log, refusals included
      });
      const accessToken = await signAccessToken(ctx.jwt, {
        role: roleForScope(token.scope),
        workspace_id: token.workspaceId,
        scope: token.scope,
        sub: token.id,
        token_name: token.name,
      });
      res.set('Cache-Control', 'no-store').json({
        access_token: accessToken,
        token_type: 'Bearer',
        expires_in: ACCESS_TOKEN_TTL_SECONDS,
        scope: token.scope,
      });
    } catch (err) {
      next(err);
    }
  });
  // Any other method: the exchange is a POST (a GET was once answered as a failed sign-in).
  router.all(EXCHANGE_PATHS, (req, _res, next) => {
    next(catalogue.unsupportedMethod(req.method, ['POST'], 'POST a workspace token here to get an access token'));
  });
  return router;
}
