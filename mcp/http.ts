import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import express, { Router, type ErrorRequestHandler, type Request } from 'express';
import type { GatewayCall } from '../gateway/engine/call.js';
import type { AppContext } from '../gateway/context.js';
import { ApiError } from '../gateway/engine/errors.js';
import { bearerToken } from '../gateway/auth/bearer.js';
import { failedAuthLimit, rateLimit, requestsLeft, takeRequests } from '../gateway/auth/ratelimit.js';
import { authenticateWorkspaceToken, requireApiEnabled, type WorkspaceToken } from '../gateway/auth/workspace-token.js';
import type { LookupCache } from '../gateway/lookups.js';
import { createMcpServer } from './server.js';
import type { McpCaller } from './tools.js';

// The MCP URL is /mcp?token=<workspace token>, or Authorization: Bearer <workspace
// token>. No OAuth: a client registers it with Client ID and Secret left empty. The transport
// is the SDK's Streamable HTTP, stateless (one server per request, JSON responses), so any
// number of Tally processes can serve one client; the server is a few closures over a tool
// catalog built once per version of the lookup lists (server.ts). The token is looked up,
// counted against its rate limit and checked against the API switch before any tool runs.
// One request is one JSON-RPC message: a batch would run up to 100 tool calls for the price of
// one request, so it is refused (the 2025-06-18 protocol dropped batches; create_expenses is
// the way to write many records at once, and counts each against the limit).

function presentedToken(req: Request): string | undefined {
  const fromQuery = typeof req.query.token === 'string' ? req.query.token : undefined;
  return fromQuery ?? bearerToken(req.headers.authorization);
}

/** The JSON-RPC id of a tools/call in the body, when the body is one. */
function toolCallId(body: unknown): string | number | null | undefined {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const msg = body as { method?: unknown; id?: unknown };
    if (msg.method === 'tools/call' && (typeof msg.id === 'string' || typeof msg.id === 'number')) return msg.id;
  }
  return undefined;
}

const BATCH_REFUSED =
  'JSON-RPC batches are not supported: send one message per request (create_expenses records up to 100 expenses in one call)';

/** MCP clients put the token in the URL; the headers other surfaces read mean nothing here. */
const MCP_TOKEN_HINT =
  'Put the workspace token in the MCP server URL: /mcp?token=tally_ws_… (or send Authorization: Bearer tally_ws_…)';

export function mcpRouter(ctx: AppContext, call: GatewayCall, lookups: LookupCache): Router {
  const router = Router();
  const json = express.json({ limit: ctx.config.maxBodyBytes, type: () => true });
  const authenticate = authenticateWorkspaceToken(ctx, presentedToken);

  router.post(
    '/mcp',
    json,
    failedAuthLimit(ctx, authenticate),
    rateLimit(ctx),
    requireApiEnabled,
    async (req, res, next) => {
      if (Array.isArray(req.body)) {
        res.status(400).json({ jsonrpc: '2.0', id: null, error: { code: -32600, message: BATCH_REFUSED } });
        return;
      }
      try {
        const key = res.locals.rateKey as string;
        const caller: McpCaller = {
          auth: res.locals.auth,
          scope: (res.locals.workspaceToken as WorkspaceToken).scope,
          charge: (hits) => takeRequests(ctx, key, hits),
          rateLimit: () => requestsLeft(ctx, key),
        };
        const { server } = createMcpServer(call, caller, await lookups.get(), { listChanged: false });
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
      } catch (err) {
        next(err);
      }
    },
  );

  // Stateless: there is no stream to resume (GET) and no session to end (DELETE).
  router.all('/mcp', (_req, res) => {
    res
      .status(405)
      .set('Allow', 'POST')
      .json({
        jsonrpc: '2.0',
        error: { code: -32000, message: 'Method not allowed: send JSON-RPC messages with POST' },
        id: null,
      });
  });

  // A rate-limited tools/call is still a tool result an agent can act on (the body is parsed
  // first for this); anything else, a refused token included, keeps its HTTP status and the
  // one error shape, before any tool runs.
  const errors: ErrorRequestHandler = (err, req, res, next) => {
    if (!(err instanceof ApiError) || res.headersSent) return next(err);
    if (err.status === 401 && err.code === 'PGRST302') return next(err.withHint(MCP_TOKEN_HINT));
    const id = err.status === 429 ? toolCallId(req.body) : undefined;
    if (id === undefined) return next(err);
    const text = `${err.message}. Retry after ${res.getHeader('Retry-After') ?? 60} seconds.`;
    res.status(200).json({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }], isError: true } });
  };
  router.use('/mcp', errors);
  return router;
}
