import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue, type ApiError } from '../errors.js';
import { header } from '../http.js';
import type { JWTPayload } from 'jose';
import { verifyJwt } from './jwt.js';
import { limitRequest } from './ratelimit.js';

// Authentication of the JWT surfaces (/rest/v1, /api/v1): a verified `Authorization: Bearer`
// JWT gives the AuthContext (its `role` claim, all claims); no header gives the anon role.
// The rate limiter's key comes with it: the workspace token behind the JWT (its `sub`), or
// the client address without one.

interface Authenticated {
  auth: AuthContext;
  /** The request limit's key: `token:<workspace token id>`, or `ip:<address>`. */
  rateKey: string;
}

/**
 * `Authorization: Bearer` with nothing after it: what a shell sends for "Bearer $JWT" when the
 * variable is empty. Said as such, not as an invalid token.
 */
export const isEmptyBearer = (authorization: string): boolean => /^\s*Bearer\s*$/i.test(authorization);

export const emptyBearer = (): ApiError =>
  catalogue.noCredential(
    'The Authorization header says "Bearer" with no token after it',
    'Is the shell variable that should hold the token empty? Send "Authorization: Bearer <token>"',
    { 'WWW-Authenticate': 'Bearer realm="tally"' },
  );

export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  if (isEmptyBearer(authorization)) throw emptyBearer();
  const m = /^Bearer[ ]+([^\s]+)\s*$/i.exec(authorization);
  if (!m) throw catalogue.invalidCredential('The Authorization header must be "Bearer <token>"', null, {});
  return m[1];
}

/** The caller of a request with this Authorization header, from this client address. */
async function authenticateBearer(
  ctx: AppContext,
  authorization: string | undefined,
  address: string | undefined,
): Promise<Authenticated> {
  const anonRole = ctx.config.anonRole;
  const token = bearerToken(authorization);
  if (token === undefined) return { auth: { role: anonRole, claims: anonClaims(anonRole) }, rateKey: `ip:${address}` };
  const claims = await verifyJwt(ctx.jwt, token);
  const role = typeof claims.role === 'string' && claims.role !== '' ? claims.role : anonRole;
  // The server's login may become any role it is a member of: only the API roles are
  // for requests. A JWT naming another (the owner, authenticator itself) is not Tally's.
  if (!ctx.config.apiRoles.includes(role)) {
    throw catalogue.invalidClaims(
      'JWT role is not an API role',
      'Exchange a workspace token at /api/v1/token for an access token',
      { 'WWW-Authenticate': 'Bearer error="invalid_token", error_description="JWT role is not an API role"' },
    );
  }
  const known = runsWith(claims, role);
  return { auth: { role, claims: known.claims }, rateKey: known.rateKey ?? `ip:${address}` };
}

/** The claims of a request without a JWT: one object per anon role, for the same reason. */
const anonymous = new Map<string, Record<string, unknown>>();
function anonClaims(role: string): Record<string, unknown> {
  let claims = anonymous.get(role);
  if (claims === undefined) anonymous.set(role, (claims = { role }));
  return claims;
}

interface RunsWith {
  role: string;
  claims: Record<string, unknown>;
  rateKey: string | undefined;
}

/**
 * The claims a request runs with and its limit's key, once per verified JWT: verifyJwt answers
 * a token it verified before with the same payload object, so a client's requests share one
 * claims object (whose JSON the engine then makes once, engine/execute.ts) instead of copying
 * it on every request.
 */
const known = new WeakMap<JWTPayload, RunsWith>();
function runsWith(payload: JWTPayload, role: string): RunsWith {
  let entry = known.get(payload);
  if (entry?.role !== role) {
    const rateKey = typeof payload.sub === 'string' ? `token:${payload.sub}` : undefined;
    entry = { role, claims: { ...payload, role }, rateKey };
    known.set(payload, entry);
  }
  return entry;
}

/**
 * The first step of every request of a JWT surface (/rest/v1, /api/v1): the surface's own
 * `check` (its apikey, or that a JWT is there at all), the Bearer JWT, then the request limit,
 * whose headers go on the response. After a failed check or JWT the request counts against the
 * client address and the authentication error is thrown, unless the address is over the
 * limit: then its 429 wins, so a flood of bad JWTs is limited too.
 */
export async function authenticateRequest(
  ctx: AppContext,
  req: IncomingMessage,
  res: ServerResponse,
  address: string | undefined,
  check: () => Promise<void> | void,
): Promise<AuthContext> {
  let caller: Authenticated;
  try {
    await check();
    caller = await authenticateBearer(ctx, header(req, 'authorization'), address);
  } catch (authError) {
    await limitRequest(ctx, res, undefined, address);
    throw authError;
  }
  await limitRequest(ctx, res, caller.rateKey, address);
  return caller.auth;
}
