import express, { type ErrorRequestHandler } from 'express';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import { limitConnectionsPerAddress, serverOptions, type HttpLimits } from './connections.js';
import type { AppContext } from './context.js';
import { catalogue, writeError } from './errors.js';
import { GATEWAY_OPTIONS } from './deployment.js';
import { changesOf, createGateway } from './engine/run.js';
import { exchangeOf, serve, type Handler } from './http.js';
import { LookupCache } from './lookups.js';
import { SURFACES, type Surface } from './surfaces.js';

// The one HTTP server: every request goes through the request shell (http.ts serve), then to
// the surface (surfaces.ts) that answers its path, the longest path that fits: a plain handler
// (/rest/v1, /api/v1, /mcp, …) or Express, which also answers every path no surface names.

/** The server's request listener: what node:http's createServer (and supertest) take. */
export type App = (req: IncomingMessage, res: ServerResponse) => void;

/** The surfaces to serve: all of them by default; `tally serve` leaves out the app's without its state. */
export function createApp(ctx: AppContext, surfaces: Surface[] = SURFACES): App {
  const trustProxy = ctx.config.trustProxy;
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple'); // raw strings only: each surface parses its own grammar
  app.set('trust proxy', trustProxy ? 1 : false);
  // req.ip is the request's one client address (the shell's, auth/address.ts) on Express too.
  Object.defineProperty(app.request, 'ip', {
    configurable: true,
    enumerable: true,
    get(this: IncomingMessage) {
      return exchangeOf(this).address;
    },
  });

  // Browsers ask for it on every page (the settings pages): no icon, and no 404 in their logs.
  app.get('/favicon.ico', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=86400').status(204).end();
  });

  // The gateway call every surface translates into (each request's own through its Exchange).
  const call = createGateway(ctx, GATEWAY_OPTIONS);

  // The live lookup lists the app's surfaces publish.
  const lookups = new LookupCache(call, changesOf(ctx));
  const services = { ctx, lookups, app: surfaces.some((s) => s.app) };
  const toExpress: Handler = (x) => app(x.req, x.res);
  const paths: { prefix: string; handle: Handler }[] = [];
  for (const surface of surfaces) {
    for (const { path, make } of surface.routers ?? []) {
      app.use(path, make(services));
      paths.push({ prefix: path.toLowerCase(), handle: toExpress });
    }
    for (const { path, make } of surface.handlers ?? [])
      paths.push({ prefix: path.toLowerCase(), handle: make(services) });
  }
  // The longest first: /api/v1/docs (a page, on Express) before /api/v1 (a handler).
  paths.sort((a, b) => b.prefix.length - a.prefix.length);
  // As much of a URL as tells which prefix it is under: the longest prefix and the character after it.
  const headLength = (paths[0]?.prefix.length ?? 0) + 1;

  app.use((_req, _res, next) => next(catalogue.invalidPath('GET / lists what this server serves')));
  app.use(errorHandler);
  return serve(
    call,
    trustProxy,
    (x) => {
      // Lower-cased once, not once per prefix compared.
      const head = (x.req.url ?? '/').slice(0, headLength).toLowerCase();
      for (const { prefix, handle } of paths) if (isUnder(head, prefix)) return handle(x);
      return toExpress(x);
    },
    ctx.config,
  );
}

/**
 * Whether a request URL's path is `prefix` or below it, ignoring case as Express's mounts do:
 * `head` is the URL's start, lower-cased, at least one character longer than `prefix`.
 */
function isUnder(head: string, prefix: string): boolean {
  if (prefix === '/') return true;
  if (!head.startsWith(prefix)) return false;
  const next = head.charAt(prefix.length);
  return next === '' || next === '/' || next === '?';
}

/** Answers anything thrown in the one error shape (errors.ts writeError). */
const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => writeError(res, err);

/** Serves `app` on `port` and `host`, within the limits of a connection (connections.ts). */
export function listen(app: App, port: number, host: string, limits: HttpLimits): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer(serverOptions(limits), app);
    limitConnectionsPerAddress(server, limits.httpConnectionsPerAddress);
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/**
 * Stops accepting connections and resolves once every open one has closed, without closing a
 * keep-alive socket under a request its client may be sending: node:http's close() closes the
 * idle ones at once, and a client that had just written its next request on one saw it reset
 * (the request lost, whether it ran or not). Here each answer from now on says
 * `Connection: close`, so its socket closes after it, and a socket that stays idle closes after
 * the keep-alive timeout its client was told (`Keep-Alive: timeout=5`), which clients respect.
 */
export function drain(server: Server): Promise<void> {
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  });
  return new Promise((resolve) => NetServer.prototype.close.call(server, () => resolve()));
}
