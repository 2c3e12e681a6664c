import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { Config } from '../gateway/config.js';
import { jwtKeys } from '../gateway/auth/jwt.js';
import { apiSwitchedOff, findWorkspaceToken, workspaceTokenAuth } from '../gateway/auth/workspace-token.js';
import {
  jwtSecretFor,
  openDatabase,
  preparedStatementsFor,
  serverLoginUrl,
  serverPool,
} from '../gateway/db/connect.js';
import { changesOf, createGateway } from '../gateway/engine/run.js';
import { GATEWAY_OPTIONS } from '../gateway/deployment.js';
import { catalogue } from '../gateway/engine/errors.js';
import { LookupCache } from '../gateway/lookups.js';
import type { GatewayCall } from '../gateway/engine/call.js';
import type { Lookups } from '../gateway/lookups.js';
import { capabilities, INSTRUCTIONS, mcpMethods, SERVER_INFO } from './server.js';
import type { McpCaller } from './tools.js';

// `tally mcp`: the same tools over stdio for desktop clients, with the workspace token from
// TALLY_TOKEN. Every tool call runs the pre-request check, so a revoked token or an API switch
// turned off stops the very next call, as over HTTP. Nothing but JSON-RPC goes to stdout. The
// session is the SDK's Server on its stdio transport, answering with the methods of server.ts.

/**
 * The SDK's Server for `caller`, for a long-lived session: refresh() gives it new lookup lists
 * (new schemas) and tells the client its tool list changed.
 */
function sdkServer(call: GatewayCall, caller: McpCaller, lookups: Lookups) {
  let current = lookups;
  const server = new Server(SERVER_INFO, {
    capabilities: capabilities(true),
    instructions: INSTRUCTIONS,
    // Tally's tools validate with their own compiled schemas; the SDK would make an Ajv of its own.
    jsonSchemaValidator: new AjvJsonSchemaValidator(),
  });
  const methods = mcpMethods(call, caller, () => current);
  server.setRequestHandler(ListToolsRequestSchema, () => methods.listTools());
  server.setRequestHandler(CallToolRequestSchema, (request) => methods.callTool(request.params));
  server.setRequestHandler(ListResourcesRequestSchema, () => methods.listResources());
  server.setRequestHandler(ReadResourceRequestSchema, (request) => methods.readResource(request.params));
  return {
    server,
    refresh(next: Lookups) {
      current = next;
      if (server.transport) void server.sendToolListChanged();
    },
  };
}

export async function serveStdio(config: Config): Promise<void> {
  const presented = config.workspaceToken;
  if (!presented) {
    throw catalogue.noCredential(
      'No workspace token: set TALLY_TOKEN',
      'Start it as TALLY_TOKEN=tally_ws_… tally mcp (tally token create --workspace W --scope read|write makes one)',
    );
  }
  const db = await openDatabase(config, { log: () => {} });
  const loginUrl = await serverLoginUrl(config, db);
  const pool = serverPool(loginUrl, {
    max: 2,
    prepare: await preparedStatementsFor(loginUrl, config.preparedStatements),
  });
  const ctx = { config, db: pool, jwt: jwtKeys(await jwtSecretFor(config, db), config.jwtPreviousSecret) };
  const token = await findWorkspaceToken(ctx, presented);
  if (!token.apiEnabled) throw apiSwitchedOff();
  const call = createGateway(ctx, GATEWAY_OPTIONS);
  // A desktop session lasts: new categories or methods reach its tool schemas when they change.
  const lookups = new LookupCache(call, changesOf(ctx), () => {
    lookups.get().then(
      (l) => mcp.refresh(l),
      () => {},
    );
  });
  // No rate limit over stdio: one desktop client on its own process and token.
  const mcp = sdkServer(call, { auth: workspaceTokenAuth(token), scope: token.scope }, await lookups.get());
  const transport = new StdioServerTransport();
  transport.onclose = () => {
    void pool.end({ timeout: 2 }).then(() => db.stop());
  };
  await mcp.server.connect(transport);
}
