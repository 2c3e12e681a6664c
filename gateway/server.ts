import express, { type ErrorRequestHandler, type Express } from 'express';
import type { Server } from 'node:http';
import type { AppContext } from './context.js';
import { catalogue, toApiError } from './engine/errors.js';
import { constraintMessage } from './fields.js';
import { errorFields, log, requestLog, serverTiming } from './log.js';
import { createGateway } from './engine/gateway.js';
import { LookupCache } from './lookups.js';
import { SURFACES, type Surface } from './surfaces.js';

// The one HTTP server: every surface (surfaces.ts) is mounted here.

/** The surfaces to serve: all of them by default; `tally serve` leaves out the app's without its state. */
export function createApp(ctx: AppContext, surfaces: Surface[] = SURFACES): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple'); // raw strings only: each surface parses its own grammar
  app.set('trust proxy', process.env.TALLY_TRUST_PROXY === '1' ? 1 : false);
  app.use(requestLog());
  app.use(serverTiming());
  // Routers decode the path for their parameters and static files; a malformed percent-escape
  // there would surface as a 500. Every surface gets the same 400 instead, before any of them.
  app.use((req, _res, next) => {
    try {
      decodeURIComponent(req.path);
    } catch {
      return next(catalogue.pathEncoding());
    }
    next();
  });

  // Browsers ask for it on every page (the settings pages): no icon, and no 404 in their logs.
  app.get('/favicon.ico', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=86400').status(204).end();
  });

  // The gateway call every surface translates into.
  const call = createGateway(ctx, { describeConstraint: constraintMessage });

  // The live lookup lists the app's surfaces publish.
  const lookups = new LookupCache(call);
  if (surfaces.some((s) => s.app)) {
    lookups
      .listen(ctx.db.control)
      .catch((err) => log.warn(errorFields(err), 'cannot LISTEN for lookup changes; relying on the cache TTL'));
  }
  for (const surface of surfaces) surface.mount(app, { ctx, call, lookups });

  app.use((_req, _res, next) => next(catalogue.invalidPath()));
  app.use(errorHandler);
  return app;
}

/** Answers anything thrown in the one error shape; an unexpected error is a logged 500. */
const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => {
  const { error, unexpected } = toApiError(err);
  if (unexpected) log.error(errorFields(err), 'unexpected error');
  if (res.headersSent) return;
  res.status(error.status).set(error.headers).json(error.body());
};

export function listen(app: Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, () => resolve(server));
    server.once('error', reject);
  });
}
