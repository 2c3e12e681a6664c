import type { RequestHandler } from 'express';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { functionsExchangeHandler } from './auth/exchange.js';
import { healthRouter } from './health.js';
import { homeRouter } from './home.js';
import type { Handler } from './http.js';
import { lazyHandler, lazyServe } from './lazy.js';
import type { LookupCache } from './lookups.js';
import { logToStderr } from './log.js';
import { REST_PATH, restHandler } from './rest/handler.js';
import { docsRouter } from './wrapper/docs.js';
import { openApiHandler, WRAPPER_PATH, wrapperHandler } from './wrapper/handler.js';

// The surfaces the server offers, each a translation into gateway calls that plugs into the
// server (server.ts) and, where it has one, into the command line. Adding a surface is adding
// an entry here.
//
// Two request models, one per family. The surfaces programs call (/rest/v1, /api/v1 with its
// token exchange and OpenAPI document, /mcp) are plain node:http handlers of the request's
// Exchange: they are the bulk of the traffic, and Express's per-request work (its request and
// response extensions, router layers, middleware around each step) was a third of their CPU.
// The pages people read (/, /settings, the reference page /api/v1/docs) and the health probes
// are Express routers: forms, sessions, redirects and static files, where Express reads simpler
// and its cost does not matter. Either way a request has been through the request shell
// (http.ts serve) first.

/** What the server gives every surface it mounts. */
interface Services {
  ctx: AppContext;
  /** The finance app's live lookup lists (categories, methods, fund kinds). */
  lookups: LookupCache;
  /** The finance app's surfaces are served (the database holds the app's state). */
  app: boolean;
}

/** A part of a surface answering every request whose path is `path` or below it, without regard to case. */
interface Mounted<T> {
  path: string;
  make(services: Services): T;
}

export interface Surface {
  name: string;
  /**
   * It serves the finance app (workspaces, tokens, members, its tables): mounted only when the
   * database holds the app's state, not when Tally stands in front of a database of its own.
   */
  app: boolean;
  /** Its plain node:http handlers, of the request's Exchange (the surfaces programs call). */
  handlers?: Mounted<Handler>[];
  /** Its Express routers (pages and probes), mounted on Express at their paths. */
  routers?: Mounted<RequestHandler>[];
  /** A command of its own on the command line (`tally NAME`), loaded when it runs. */
  command?: {
    name: string;
    usage: string;
    /** Its options, as commander takes them: [flags, description]. */
    options?: [string, string][];
    run(config: Config, options: Record<string, unknown>): Promise<void>;
  };
}

export const SURFACES: Surface[] = [
  // /rest/v1, PostgREST's interface.
  { name: 'rest', app: false, handlers: [{ path: REST_PATH, make: (s) => restHandler(s.ctx) }] },
  { name: 'health', app: false, routers: [{ path: '/', make: (s) => healthRouter(s.ctx.db) }] },
  // The landing page at /: what the server serves, with links.
  { name: 'home', app: false, routers: [{ path: '/', make: (s) => homeRouter(s.app) }] },
  // The token exchange, also at the path of a functions host; at POST /api/v1/token it is a route
  // of the wrapper (wrapper/handler.ts).
  {
    name: 'exchange',
    app: true,
    handlers: [{ path: '/functions/v1/api-token', make: (s) => functionsExchangeHandler(s.ctx) }],
  },
  {
    // MCP for agents: the workspace token in ?token=, the tools are gateway calls. Loaded on the
    // first /mcp request, since most processes never serve one: its tool catalog and schemas
    // stay out of memory until then.
    name: 'mcp',
    app: true,
    handlers: [
      {
        path: '/mcp',
        make: (s) => lazyServe(async () => (await import('../mcp/http.js')).mcpHandler(s.ctx, s.lookups)),
      },
    ],
    command: {
      name: 'mcp',
      usage: 'the MCP server on stdio (workspace token in TALLY_TOKEN)',
      options: [
        [
          '--toolsets <areas>',
          'load only these areas of tools, comma-separated (workspace, expenses, funds, contacts, activity)',
        ],
        ['--read-only', 'load only the read tools'],
      ],
      run: async (config, options) => {
        logToStderr(); // standard output carries only JSON-RPC
        return (await import('../mcp/stdio.js')).serveStdio(config, {
          toolsets:
            typeof options.toolsets === 'string' ? options.toolsets.split(',').filter((s) => s !== '') : undefined,
          readOnly: options.readOnly === true,
        });
      },
    },
  },
  // The REST wrapper /api/v1 (its token exchange and its live OpenAPI document included), the
  // document also at /openapi.json; its reference page /api/v1/docs is a page, on Express.
  {
    name: 'wrapper',
    app: true,
    handlers: [
      { path: WRAPPER_PATH, make: (s) => wrapperHandler(s.ctx, s.lookups) },
      { path: '/openapi.json', make: (s) => openApiHandler(s.ctx, s.lookups) },
    ],
    routers: [{ path: `${WRAPPER_PATH}/docs`, make: () => docsRouter(`${WRAPPER_PATH}/openapi.json`) }],
  },
  // The workspace settings pages (HTML, their own errors): members manage API access.
  {
    name: 'settings',
    app: true,
    routers: [
      {
        path: '/settings',
        make: (s) => lazyHandler(async () => (await import('./settings/router.js')).settingsRouter(s.ctx)),
      },
    ],
  },
];
