import express, { type ErrorRequestHandler, type Express } from 'express';
import type { Server } from 'node:http';
import type { AppContext } from './context.js';
import { catalogue, toApiError } from './errors.js';
import { restRouter } from './rest/router.js';
import { errorFields, log, requestLog, serverTiming } from './log.js';
import { exchangeRouter } from './auth/exchange.js';
import { createGateway } from './gateway.js';
import { LookupCache } from './lookups.js';
import { lazyHandler, lazyUnder } from './lazy.js';
import { wrapperRouter } from './wrapper/router.js';

// The one HTTP server: every surface is a router mounted here.

/** /readyz answers within 2 s whatever the database does. */
const READY_DEADLINE_MS = 1500;

export function createApp(ctx: AppContext): Express {
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
  const call = createGateway(ctx);

  // /rest/v1 first: its requests, the bulk of the traffic, pass no other surface's routers.
  app.use('/rest/v1', restRouter(ctx, call));

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready: a pooled connection answers within READY_DEADLINE_MS. A pool whose every slot is
  // stuck is not ready either (503), and the answer says how many slots are free.
  app.get('/readyz', async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    const probe = ctx.db`SELECT 1`;
    try {
      await Promise.race([probe, new Promise((_, reject) => (timer = setTimeout(reject, READY_DEADLINE_MS)))]);
      res.json({ status: 'ready', pool: ctx.db.stats() });
    } catch {
      probe.catch(() => {});
      res.status(503).set('Retry-After', '5').json({ status: 'unavailable', message: 'The database is not reachable or the pool has no free connection', pool: ctx.db.stats() });
    } finally {
      clearTimeout(timer);
    }
  });

  // The token exchange comes before the /api/v1 wrapper: its POST /api/v1/token authenticates
  // with a workspace token, not a JWT.
  app.use(exchangeRouter(ctx));

  // The live lookup lists the surfaces publish.
  const lookups = new LookupCache(call);
  lookups.listen(ctx.db.control).catch((err) => log.warn(errorFields(err), 'cannot LISTEN for lookup changes; relying on the cache TTL'));

  // MCP for agents: the workspace token in ?token=, the tools are gateway calls.
  // Loaded on the first /mcp request: the MCP SDK is most of a process's memory otherwise.
  app.use(lazyUnder('/mcp', async () => (await import('../mcp/http.js')).mcpRouter(ctx, call, lookups)));

  // The REST wrapper /api/v1 (after the exchange: POST /api/v1/token needs no JWT) and its live
  // OpenAPI description, also published at /openapi.json.
  app.use(wrapperRouter(ctx, call, lookups));

  // The workspace settings pages (HTML, their own errors): members manage API access.
  app.use('/settings', lazyHandler(async () => (await import('./settings/router.js')).settingsRouter(ctx)));

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
