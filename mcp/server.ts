import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AuthContext, GatewayCall } from '../gateway/call.js';
import { ApiError } from '../gateway/errors.js';
import type { Lookups } from '../gateway/lookups.js';
import { TableClient, ToolError } from './gateway-client.js';
import { tools, type Tool } from './tools.js';
import { errorFields, log } from '../gateway/log.js';

// One MCP server for one caller: the 14 tools with the live category and method enums, every
// call a gateway call under the caller's AuthContext. Over HTTP it is built per request (the
// transport is stateless), so a new category appears in the very next tools/list; a long-lived
// stdio server calls refresh() when the lists change, which tells the client list_changed.

export const SERVER_INFO = { name: 'tally', version: '1.0.0' };

const INSTRUCTIONS =
  'Tally keeps the finances of one workspace: personal expenses, group funds with their transactions, and a contact roster. ' +
  'Amounts are in the workspace currency; fund transactions are positive for income and negative for expenses. ' +
  'Category and payment method ids must be one of the values listed in each tool schema.';

/** One sentence an agent can act on, from whatever a tool call failed with. */
export function toolErrorText(err: unknown): string {
  if (err instanceof ToolError) return err.message;
  if (err instanceof ApiError) {
    if (err.status === 429) return `${err.message}. Retry after ${err.headers['Retry-After'] ?? 60} seconds.`;
    if (err.status === 401) return `${err.message}. ${err.hint ?? 'The workspace token is no longer valid.'}`;
    const parts = [err.message, err.details, err.hint].filter((p): p is string => typeof p === 'string' && p.length > 0);
    return parts.map((p) => p.replace(/[.\s]+$/, '')).join('. ') + '.';
  }
  log.error(errorFields(err), 'unexpected MCP tool error');
  return 'The tool failed unexpectedly; this is a bug in Tally and has been logged. Try again or use another tool.';
}

export interface TallyMcpServer {
  server: McpServer;
  /** New input schemas from new lookup lists, announced to the client. */
  refresh(lookups: Lookups): void;
}

// Strict: a misspelt parameter is an error, not silently ignored. The schemas change only with
// the lookup lists, and LookupCache hands out one Lookups object per version of them: build each
// tool's schema once per version, not once per request.
const schemas = new WeakMap<Lookups, Map<Tool, z.ZodObject>>();
function inputSchema(tool: Tool, lookups: Lookups): z.ZodObject {
  let byTool = schemas.get(lookups);
  if (!byTool) schemas.set(lookups, (byTool = new Map()));
  let schema = byTool.get(tool);
  if (!schema) byTool.set(tool, (schema = z.object(tool.input(lookups)).strict()));
  return schema;
}

export function createMcpServer(call: GatewayCall, auth: AuthContext, lookups: Lookups): TallyMcpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: { listChanged: true } }, instructions: INSTRUCTIONS });
  const db = new TableClient(call, auth);
  const registered = new Map<Tool, RegisteredTool>();
  for (const tool of tools) {
    registered.set(tool, server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: inputSchema(tool, lookups),
        outputSchema: z.object(tool.output),
        annotations: { title: tool.title, ...tool.annotations },
      },
      async (args: Record<string, unknown>): Promise<CallToolResult> => {
        try {
          const result = await tool.run(args, db);
          return { content: [{ type: 'text', text: result.text }], structuredContent: result.structured };
        } catch (err) {
          return { content: [{ type: 'text', text: toolErrorText(err) }], isError: true };
        }
      },
    ));
  }
  return {
    server,
    refresh(next) {
      for (const [tool, handle] of registered) handle.inputSchema = inputSchema(tool, next);
      if (server.isConnected()) server.sendToolListChanged();
    },
  };
}
