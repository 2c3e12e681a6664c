import type { Express } from 'express';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { exchangeRouter } from './auth/exchange.js';
import { healthRouter } from './health.js';
import { homeRouter } from './home.js';
import type { Handler } from './http.js';
import { lazyHandler, lazyServe } from './lazy.js';
import type { LookupCache } from './lookups.js';
import { logToStderr } from './log.js';
import { REST_PATH, restHandler } from './rest/handler.js';
import { wrapperExpressRoutes, wrapperHandler } from './wrapper/handler.js';

// The surfaces the server offers, each a translation into gateway calls that plugs into the
// server (server.ts mounts them in this order) and, where it has one, into the command line.
// Adding a surface is adding an entry here.

/** What the server gives every surface it mounts. */
interface Services {
  ctx: AppContext;
  /** The finance app's live lookup lists (categories, methods, fund kinds). */
  lookups: LookupCache;
  /** The finance app's surfaces are served (the database holds the app's state). */
  app: boolean;
}

export interface Surface {
  name: string;
  /**
   * It serves the finance app (workspaces, tokens, members, its tables): mounted only when the
   * database holds the app's state, not when Tally stands in front of a database of its own.
   */
  app: boolean;
  /** Its routes on the Express application, */
  mount?(app: Express, services: Services): void;
  /**
   * and/or a plain node:http handler that answers every request under `path` (compared as
   * Express compares paths, without regard to case) before Express sees it: for the surfaces
   * whose requests are the bulk of the traffic. Either way the request has been through the
   * request shell (http.ts serve): the Exchange it gets has the client address, the gateway
   * call that counts its database time, and the caller for the log line. `express` hands a
   * request under `path` that an Express surface answers to Express.
   */
  handler?: { path: string; make(services: Services, express: Handler): Handler };
  /** A command of its own on the command line (`tally NAME`), loaded when it runs. */
  command?: { name: string; usage: string; run(config: Config): Promise<void> };
}

export const SURFACES: Surface[] = [
  // /rest/v1, the bulk of the traffic: answered before Express and any other surface.
  {
    name: 'rest',
    app: false,
    handler: { path: REST_PATH, make: (s) => restHandler(s.ctx) },
  },
  { name: 'health', app: false, mount: (app, s) => app.use(healthRouter(s.ctx.db)) },
  // The landing page at /: what the server serves, with links.
  { name: 'home', app: false, mount: (app, s) => app.use(homeRouter(s.app)) },
  // The token exchange: POST /api/v1/token authenticates with a workspace token, not a JWT; the
  // wrapper's handler hands that request on to Express (wrapper/handler.ts forExpress).
  { name: 'exchange', app: true, mount: (app, s) => app.use(exchangeRouter(s.ctx)) },
  {
    // MCP for agents: the workspace token in ?token=, the tools are gateway calls. A node:http
    // handler of its own, like /rest/v1 (an agent's every step is a request); loaded on the
    // first /mcp request, since most processes never serve one: its tool catalog and schemas
    // stay out of memory until then.
    name: 'mcp',
    app: true,
    handler: {
      path: '/mcp',
      make: (s) => lazyServe(async () => (await import('../mcp/http.js')).mcpHandler(s.ctx, s.lookups)),
    },
    command: {
      name: 'mcp',
      usage: 'the MCP server on stdio (workspace token in TALLY_TOKEN)',
      run: async (config) => {
        logToStderr(); // standard output carries only JSON-RPC
        return (await import('../mcp/stdio.js')).serveStdio(config);
      },
    },
  },
  // The REST wrapper /api/v1, answered before Express; its live OpenAPI description also at
  // /openapi.json and its reference page /api/v1/docs are Express routes.
  {
    name: 'wrapper',
    app: true,
    handler: {
      path: '/api/v1',
      make: (s, express) => wrapperHandler(s.ctx, s.lookups, express),
    },
    mount: (app, s) => app.use(wrapperExpressRoutes(s.ctx, s.lookups)),
  },
  // The workspace settings pages (HTML, their own errors): members manage API access.
  {
    name: 'settings',
    app: true,
    mount: (app, s) =>
      app.use(
        '/settings',
        lazyHandler(async () => (await import('./settings/router.js')).settingsRouter(s.ctx)),
      ),
  },
];
