import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
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
import { catalogue } from '../gateway/errors.js';
import { LookupCache, type Lookups } from '../gateway/lookups.js';
import { connectChecked, mcpServer } from './server.js';
import { selectedTools, type ToolSelection } from './tools.js';

// `tally mcp`: the same tools over stdio for desktop clients, with the workspace token from
// TALLY_TOKEN. Every tool call runs the pre-request check, so a revoked token or an API switch
// turned off stops the very next call, as over HTTP. Nothing but JSON-RPC goes to stdout. The
// session is the SDK's Server of server.ts on its stdio transport, as over HTTP.

export async function serveStdio(config: Config, selection: ToolSelection = {}): Promise<void> {
  const loaded = selection.toolsets?.length || selection.readOnly ? selectedTools(selection) : undefined;
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
  // No rate limit over stdio: one desktop client on its own process and token.
  const caller = { auth: workspaceTokenAuth(token), scope: token.scope };
  let current: Lookups;
  const server = mcpServer(() => ({ call, caller, lookups: current, loaded }), { listChanged: true });
  // A desktop session lasts: new categories or methods reach its tool schemas when they change.
  const lookups = new LookupCache(call, changesOf(ctx), () => {
    lookups.get().then(
      (next) => {
        current = next;
        if (server.transport) void server.sendToolListChanged();
      },
      () => {},
    );
  });
  current = await lookups.get();
  const transport = new StdioServerTransport();
  transport.onclose = () => {
    void pool.end({ timeout: 2 }).then(() => db.stop());
  };
  await connectChecked(server, transport);
}
