import express, { type Express } from 'express';
import type { AuthContext } from '../gateway/call.js';
import { bearerAuth } from '../gateway/auth/bearer.js';
import { limitAfter } from '../gateway/auth/ratelimit.js';
import { scopeRefusal } from '../gateway/auth/scopes.js';
import { ApiError } from '../gateway/errors.js';
import { errorHandler } from '../gateway/server.js';
import type { TestApp } from './harness/app.js';

// A minimal JWT surface for the access tests: the same authentication (bearerAuth), rate limit
// (rateLimit, sharing the server's limiter) and request transaction shape as /rest/v1 (SET
// LOCAL ROLE from the JWT, the claims, the pre-request check, one statement), without the
// generic gateway. It proves that these pieces compose: a revoked token or a switched-off
// workspace stops the very next request. The /rest/v1 tests do the same through the gateway.

const PT = /^PT(\d{3})$/;

export function probeApp(t: TestApp): Express {
  const app = express();
  app.set('trust proxy', false);
  const run = (statement: 'read' | 'write'): express.RequestHandler => async (req, res, next) => {
    const auth = res.locals.auth as AuthContext;
    try {
      const rows = await t.ctx.db.begin(async (tx) => {
        await tx`SELECT set_config('role', ${auth.role}, true), set_config('request.jwt.claims', ${JSON.stringify(auth.claims)}, true)`;
        await tx`SELECT tally.check_request()`;
        return statement === 'read'
          ? tx`SELECT count(*)::int AS n FROM public.personal_transactions`
          : tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id) VALUES ('probe', 1, 'other', 'cash') RETURNING 1 AS n`;
      });
      res.status(statement === 'read' ? 200 : 201).json(rows[0]);
    } catch (err) {
      const e = err as { code?: string; message?: string; hint?: string };
      const pt = e.code ? PT.exec(e.code) : null;
      if (pt) return next(new ApiError(Number(pt[1]), e.code!, e.message ?? '', null, e.hint ?? null));
      const refusal = scopeRefusal(req.method, auth, e.code);
      if (refusal) return next(refusal);
      if (e.code === '42501') return next(new ApiError(403, '42501', 'permission denied'));
      next(err);
    }
  };
  // Mounted as /rest/v1 and /api/v1 mount it: authentication, then the shared rate limit.
  const authenticated = limitAfter(t.ctx, bearerAuth(t.ctx));
  app.get('/probe', authenticated, run('read'));
  app.post('/probe', authenticated, run('write'));
  app.use(errorHandler);
  return app;
}
