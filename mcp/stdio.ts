import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Config } from '../gateway/config.js';
import { jwtKeys } from '../gateway/auth/jwt.js';
import { apiSwitchedOff, findWorkspaceToken, workspaceTokenAuth } from '../gateway/auth/workspace-token.js';
import { jwtSecretFor, openDatabase, serverLoginUrl, serverPool } from '../gateway/db/connect.js';
import { createGateway } from '../gateway/engine/gateway.js';
import { constraintMessage } from '../gateway/fields.js';
import { catalogue } from '../gateway/engine/errors.js';
import { LookupCache } from '../gateway/lookups.js';
import { createMcpServer } from './server.js';

// `tally mcp`: the same tools over stdio for desktop clients, with the workspace token from
// TALLY_TOKEN. Every tool call runs the pre-request check, so a revoked token or an API switch
// turned off stops the very next call, as over HTTP. Nothing but JSON-RPC goes to stdout.

export async function serveStdio(config: Config): Promise<void> {
  const presented = process.env.TALLY_TOKEN;
  if (!presented) {
    throw catalogue.noCredential(
      'No workspace token: set TALLY_TOKEN',
      'Start it as TALLY_TOKEN=tally_ws_… tally mcp (tally token create --workspace W --scope read|write makes one)',
    );
  }
  const db = await openDatabase(config, () => {});
  const pool = serverPool(await serverLoginUrl(config, db), { max: 2 });
  const ctx = { config, db: pool, jwt: jwtKeys(await jwtSecretFor(config, db), config.jwtPreviousSecret) };
  const token = await findWorkspaceToken(ctx, presented);
  if (!token.apiEnabled) throw apiSwitchedOff();
  const call = createGateway(ctx, { describeConstraint: constraintMessage });
  const lookups = new LookupCache(call);
  // No rate limit over stdio: one desktop client on its own process and token.
  const mcp = createMcpServer(call, { auth: workspaceTokenAuth(token), scope: token.scope }, await lookups.get(), {
    listChanged: true,
  });
  // A desktop session lasts: new categories or methods reach its tool schemas when they change.
  await lookups.listen(pool.control, () => {
    lookups.get().then(
      (l) => mcp.refresh(l),
      () => {},
    );
  });
  const transport = new StdioServerTransport();
  transport.onclose = () => {
    void pool.end({ timeout: 2 }).then(() => db.stop());
  };
  await mcp.server.connect(transport);
}
