import type { Request, RequestHandler } from 'express';
import type { AuthContext } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { catalogue } from '../engine/errors.js';
import { verifyJwt } from './jwt.js';

// Authentication of the JWT surfaces (/rest/v1, /api/v1): a verified `Authorization: Bearer`
// JWT gives the AuthContext (its `role` claim, all claims); no header gives the anon role.
// Sets res.locals.auth, and res.locals.rateKey for the rate limiter: the workspace token
// behind the JWT (its `sub`), or the client address without one.

export function bearerToken(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  const m = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  if (!m) throw catalogue.invalidCredential('The Authorization header must be "Bearer <token>"', null, {});
  return m[1];
}

export function bearerAuth(ctx: AppContext): RequestHandler {
  const anonRole = ctx.config.anonRole;
  return async (req, res, next) => {
    try {
      const token = bearerToken(req);
      if (token === undefined) {
        res.locals.auth = { role: anonRole, claims: { role: anonRole } } satisfies AuthContext;
        res.locals.rateKey = `ip:${req.ip}`;
        return next();
      }
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
      res.locals.auth = { role, claims: { ...claims, role } } satisfies AuthContext;
      res.locals.rateKey = typeof claims.sub === 'string' ? `token:${claims.sub}` : `ip:${req.ip}`;
      next();
    } catch (err) {
      next(err);
    }
  };
}
