import type { IncomingMessage } from 'node:http';
import { optionalJsonReader } from '../body.js';
import { header, sendJson, type Handler } from '../http.js';
import type { AppContext } from '../context.js';
import { catalogue } from '../errors.js';
import { ACCESS_TOKEN_TTL_SECONDS, signAccessToken } from './jwt.js';
import { authenticateWorkspaceRequest, oneWorkspaceToken, roleForScope } from './workspace-token.js';
import { emptyBearer, isEmptyBearer } from './bearer.js';
import { group } from '../engine/invariant.js';

// The token exchange: a workspace token in, a one-hour access
// token (JWT) out. Served at POST /api/v1/token (a route of the wrapper, wrapper/handler.ts) and
// POST /functions/v1/api-token (a path of its own, surfaces.ts).
//
// The checks are MCP's (authenticateWorkspaceRequest): the failed-authentication limit per
// address, the lookup (401 unknown/revoked), the request limit keyed by the token, the API
// switch (403); then the JWT.

const FUNCTIONS_PATH = '/functions/v1/api-token';

/**
 * The workspace token of an exchange request, from one of three places: the
 * Authorization header as a bearer value, the x-api-token header, the JSON body's `token`.
 * Clients of a functions host often put a platform key of their own into Authorization and
 * the workspace token elsewhere, so a value that is not a workspace token there gives way to
 * one in the other places. Two different workspace tokens are refused rather than guessed at.
 */
function presentedToken(req: IncomingMessage, body: unknown): string | undefined {
  const candidates: string[] = [];
  const authorization = req.headers.authorization;
  if (authorization !== undefined && !isEmptyBearer(authorization)) {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    candidates.push(m ? group(m, 1) : authorization);
  }
  const apiToken = header(req, 'x-api-token');
  if (apiToken !== undefined) candidates.push(apiToken.trim());
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

/** Answers one exchange request (its method and path checked by the caller). */
export function tokenExchange(ctx: AppContext): Handler {
  // The body is optional: only a JSON content type is read (body.ts); malformed JSON is a 400 in
  // the error shape.
  const readJson = optionalJsonReader(Math.min(ctx.config.maxBodyBytes, 64 * 1024));
  return async (x) => {
    const body = await readJson(x.req, x.res);
    const { token } = await authenticateWorkspaceRequest(ctx, x.res, x.address, () => presentedToken(x.req, body), {
      identified: (auth) => (x.auth = auth), // for the request log, refusals included
    });
    const accessToken = await signAccessToken(ctx.jwt, {
      role: roleForScope(token.scope),
      workspace_id: token.workspaceId,
      scope: token.scope,
      sub: token.id,
      token_name: token.name,
    });
    x.res.setHeader('Cache-Control', 'no-store');
    sendJson(x.res, 200, {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_SECONDS,
      scope: token.scope,
    });
  };
}

/** POST /functions/v1/api-token: the exchange at the path of a functions host. */
export function functionsExchangeHandler(ctx: AppContext): Handler {
  const exchange = tokenExchange(ctx);
  return (x) => {
    const below = x.path.slice(FUNCTIONS_PATH.length);
    if (below !== '' && below !== '/') throw catalogue.invalidPath('GET / lists what this server serves');
    // Any other method: the exchange is a POST (a GET was once answered as a failed sign-in).
    if (x.req.method !== 'POST')
      throw catalogue.unsupportedMethod(
        x.req.method ?? '',
        ['POST'],
        'POST a workspace token here to get an access token',
      );
    return exchange(x);
  };
}
