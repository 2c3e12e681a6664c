import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Tool as ToolDefinition,
} from '@modelcontextprotocol/sdk/types.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { GatewayCall } from '../gateway/engine/call.js';
import { ApiError } from '../gateway/engine/errors.js';
import { readOnlyError } from '../gateway/auth/scopes.js';
import type { Scope } from '../gateway/auth/workspace-token.js';
import { financeFields, type JsonSchema } from '../gateway/fields.js';
import type { Lookups } from '../gateway/lookups.js';
import { createAjv, describeError } from '../gateway/wrapper/validate.js';
import { errorFields, log } from '../gateway/log.js';
import { TableClient, ToolError } from './gateway-client.js';
import { isReadTool, tools, workspaceInfo, type McpCaller, type Tool, type ToolContext } from './tools.js';

// One MCP server for one caller, on the SDK's low-level Server: tools/list answers a list built
// once per version of the lookup lists (and per scope: a read-only token is offered the read
// tools only), and tools/call validates arguments with ajv against the same JSON Schemas, built
// from the field rules of gateway/fields.ts. So a server per HTTP request costs a few closures,
// not a schema conversion; a long-lived stdio server calls refresh() when the lists change.

const SERVER_INFO = { name: 'tally', version: '1.0.0' };

const INSTRUCTIONS =
  'Tally keeps the finances of one workspace: personal expenses, group funds with their transactions, and a contact roster. ' +
  'Amounts are in the workspace currency (get_workspace says which); fund transactions are positive for income and negative for expenses. ' +
  'Category and payment method ids must be one of the values listed in each tool schema. Lists come in pages: pass next_offset as offset ' +
  'while has_more is true. Every result carries its records as JSON after a one-line summary.';

const WORKSPACE_URI = 'tally://workspace';

// The SDK's Server makes a new Ajv (with its formats) for every instance unless it is given
// one: that alone was most of the cost of a server per HTTP request. Tally's tools never use
// it (they validate with their own compiled schemas), so every server shares this one.
const SHARED_VALIDATOR = new AjvJsonSchemaValidator();

/** One sentence an agent can act on, from whatever a tool call failed with. */
function toolErrorText(err: unknown): string {
  if (err instanceof ToolError) return err.message;
  if (err instanceof ApiError) {
    if (err.status === 429) return `${err.message}. Retry after ${err.headers['Retry-After'] ?? 60} seconds.`;
    if (err.status === 401) return `${err.message}. ${err.hint ?? 'The workspace token is no longer valid.'}`;
    // The constraint's name or Postgres's own text add nothing to the field's sentence.
    const details =
      typeof err.details === 'string' && !/^(constraint|column): /.test(err.details) && err.code !== '42501'
        ? err.details
        : null;
    const parts = [err.message, details, err.hint].filter((p): p is string => typeof p === 'string' && p.length > 0);
    return parts.map((p) => p.replace(/[.\s]+$/, '')).join('. ') + '.';
  }
  log.error(errorFields(err), 'unexpected MCP tool error');
  return 'The tool failed unexpectedly; this is a bug in Tally and has been logged. Try again or use another tool.';
}

interface CompiledTool {
  tool: Tool;
  schema: JsonSchema;
  validate: ValidateFunction;
}

interface Catalog {
  byName: Map<string, CompiledTool>;
  list: Record<Scope, { tools: ToolDefinition[] }>;
}

// LookupCache hands out one Lookups object per version of the lists: a WeakMap keyed by it
// builds (and compiles) each catalog once and drops old versions with them.
const catalogs = new WeakMap<Lookups, Catalog>();

function catalogFor(lookups: Lookups): Catalog {
  let catalog = catalogs.get(lookups);
  if (catalog) return catalog;
  const ajv = createAjv();
  const fields = financeFields(lookups);
  const byName = new Map<string, CompiledTool>();
  const definitions: { tool: Tool; definition: ToolDefinition }[] = [];
  for (const tool of tools) {
    const { properties, required } = tool.input(fields, lookups);
    // Strict: a misspelt argument is an error, not silently ignored.
    const schema: JsonSchema = {
      type: 'object',
      properties,
      ...(required?.length ? { required } : {}),
      additionalProperties: false,
    };
    byName.set(tool.name, { tool, schema, validate: ajv.compile(schema) });
    definitions.push({
      tool,
      definition: {
        name: tool.name,
        title: tool.title,
        description: tool.description,
        inputSchema: schema as ToolDefinition['inputSchema'],
        outputSchema: {
          type: 'object',
          properties: tool.output,
          required: Object.keys(tool.output),
        } as ToolDefinition['outputSchema'],
        annotations: { title: tool.title, ...tool.annotations },
      },
    });
  }
  catalog = {
    byName,
    list: {
      write: { tools: definitions.map((d) => d.definition) },
      read: { tools: definitions.filter((d) => isReadTool(d.tool)).map((d) => d.definition) },
    },
  };
  catalogs.set(lookups, catalog);
  return catalog;
}

/** ajv's errors as one sentence naming each argument, in the wrapper's words. */
function argumentErrors(name: string, errors: ErrorObject[], schema: JsonSchema): string {
  const problems = errors
    .filter((e) => !e.schemaPath.includes('/anyOf/')) // the alternatives of a date filter: the anyOf error says it once
    .map((e) =>
      e.keyword === 'anyOf'
        ? `${e.instancePath.slice(1).replace(/\//g, '.')} must be an ISO 8601 date (2026-03-14) or date-time (2026-03-14T18:30:00Z)`
        : describeError(e, schema),
    )
    .map((p) =>
      p
        .replace('is not a known field (known fields:', 'is not a known argument (known arguments:')
        .replace('the request body', 'the arguments'),
    );
  return `Invalid arguments for ${name}: ${[...new Set(problems)].join('; ')}.`;
}

export interface TallyMcpServer {
  server: Server;
  /** New lookup lists: new schemas, announced to the client (stdio). */
  refresh(lookups: Lookups): void;
}

/**
 * A server for `caller`. listChanged is advertised only where the transport can deliver the
 * notification (stdio); stateless HTTP builds the list afresh on every request anyway.
 */
export function createMcpServer(
  call: GatewayCall,
  caller: McpCaller,
  lookups: Lookups,
  options: { listChanged: boolean },
): TallyMcpServer {
  let current = lookups;
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: options.listChanged ? { listChanged: true } : {}, resources: {} },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: SHARED_VALIDATOR,
  });
  const context = (): ToolContext => ({ db: new TableClient(call, caller.auth), caller, lookups: current });

  server.setRequestHandler(ListToolsRequestSchema, () => catalogFor(current).list[caller.scope]);

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const name = request.params.name;
    const compiled = catalogFor(current).byName.get(name);
    if (!compiled)
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${name}": tools/list shows the tools of this token`);
    const fail = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: true });
    if (caller.scope === 'read' && !isReadTool(compiled.tool)) return fail(toolErrorText(readOnlyError()));
    const args = request.params.arguments ?? {};
    if (!compiled.validate(args)) return fail(argumentErrors(name, compiled.validate.errors ?? [], compiled.schema));
    try {
      const { structured, summary } = await compiled.tool.run(args, context());
      // The records as JSON text too: a host that passes only `content` to the model keeps the ids.
      return {
        content: [{ type: 'text', text: `${summary}\n${JSON.stringify(structured)}` }],
        structuredContent: structured,
      };
    } catch (err) {
      return fail(toolErrorText(err));
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      {
        uri: WORKSPACE_URI,
        name: 'workspace',
        title: 'This workspace',
        mimeType: 'application/json',
        description:
          "The workspace's name and currency, the token's scope, the rate limit left and the live category, method and fund kind lists",
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== WORKSPACE_URI)
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown resource ${request.params.uri}: resources/list shows ${WORKSPACE_URI}`,
      );
    try {
      const info = await workspaceInfo(context());
      return { contents: [{ uri: WORKSPACE_URI, mimeType: 'application/json', text: JSON.stringify(info) }] };
    } catch (err) {
      throw new McpError(ErrorCode.InternalError, toolErrorText(err));
    }
  });

  return {
    server,
    refresh(next) {
      current = next;
      if (server.transport) void server.sendToolListChanged();
    },
  };
}
