import type { Express } from 'express';
import type { GatewayCall } from './engine/call.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { exchangeRouter } from './auth/exchange.js';
import { healthRouter } from './health.js';
import { lazyHandler, lazyUnder } from './lazy.js';
import type { LookupCache } from './lookups.js';
import { logToStderr } from './log.js';
import { restRouter } from './rest/router.js';
import { wrapperRouter } from './wrapper/router.js';

// The surfaces the server offers, each a translation into gateway calls that plugs into the
// server (server.ts mounts them in this order) and, where it has one, into the command line.
// Adding a surface is adding an entry here.

/** What the server gives every surface it mounts. */
interface Services {
  ctx: AppContext;
  /** The one gateway call every surface translates into. */
  call: GatewayCall;
  /** The finance app's live lookup lists (categories, methods, fund kinds). */
  lookups: LookupCache;
}

export interface Surface {
  name: string;
  /**
   * It serves the finance app (workspaces, tokens, members, its tables): mounted only when the
   * database holds the app's state, not when Tally stands in front of a database of its own.
   */
  app: boolean;
  mount(app: Express, services: Services): void;
  /** A command of its own on the command line (`tally NAME`), loaded when it runs. */
  command?: { name: string; usage: string; run(config: Config): Promise<void> };
}

export const SURFACES: Surface[] = [
  // /rest/v1 first: its requests, the bulk of the traffic, pass no other surface's routers.
  { name: 'rest', app: false, mount: (app, s) => app.use('/rest/v1', restRouter(s.ctx, s.call)) },
  { name: 'health', app: false, mount: (app, s) => app.use(healthRouter(s.ctx.db)) },
  // The token exchange comes before the /api/v1 wrapper: its POST /api/v1/token authenticates
  // with a workspace token, not a JWT.
  { name: 'exchange', app: true, mount: (app, s) => app.use(exchangeRouter(s.ctx)) },
  {
    // MCP for agents: the workspace token in ?token=, the tools are gateway calls. Loaded on the
    // first /mcp request: the MCP SDK is most of a process's memory otherwise.
    name: 'mcp',
    app: true,
    mount: (app, s) =>
      app.use(lazyUnder('/mcp', async () => (await import('../mcp/http.js')).mcpRouter(s.ctx, s.call, s.lookups))),
    command: {
      name: 'mcp',
      usage: 'the MCP server on stdio (workspace token in TALLY_TOKEN)',
      run: async (config) => {
        logToStderr(); // standard output carries only JSON-RPC
        return (await import('../mcp/stdio.js')).serveStdio(config);
      },
    },
  },
  // The REST wrapper /api/v1 and its live OpenAPI description, also at /openapi.json.
  { name: 'wrapper', app: true, mount: (app, s) => app.use(wrapperRouter(s.ctx, s.call, s.lookups)) },
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
