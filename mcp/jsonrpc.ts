import type { Lookups } from '../gateway/lookups.js';
import { capabilities, ErrorCode, INSTRUCTIONS, mcpMethods, RpcError, SERVER_INFO } from './server.js';
import type { GatewayCall } from '../gateway/engine/call.js';
import type { McpCaller } from './tools.js';

// One JSON-RPC message of MCP, checked and answered without the SDK: what its Server and its
// stateless Streamable HTTP transport answered, minus their cost per request (a Server with its
// handlers, a transport, a web Request and Response around node's, zod parsing every message).
// The checks are the SDK's schemas written out: a message has exactly the members of a request,
// a notification, a result or an error; ids are strings or integers; params are objects. The
// params of the methods served are checked here too, so a wrong shape is -32602, never a 500.

/** The protocol versions the SDK speaks, newest first: initialize answers the first when asked for another. */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];

type Id = string | number;
type Params = Record<string, unknown>;

/** A message that expects an answer; notifications and responses need none. */
export type Message = { id: Id; method: string; params?: Params } | { id?: undefined };

export interface RpcAnswer {
  jsonrpc: '2.0';
  id: Id | null;
  result?: unknown;
  error?: { code: number; message: string };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is Id => typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));
const onlyKeys = (o: object, allowed: string[]): boolean => Object.keys(o).every((k) => allowed.includes(k));
const isParams = (v: unknown): boolean =>
  v === undefined || (isObject(v) && (v._meta === undefined || isObject(v._meta)));

/** `value` as one JSON-RPC message, or undefined when it is not one. */
export function parseMessage(value: unknown): Message | undefined {
  if (!isObject(value) || value.jsonrpc !== '2.0') return undefined;
  if ('method' in value) {
    if (typeof value.method !== 'string' || !isParams(value.params)) return undefined;
    const params = value.params as Params | undefined;
    if (!('id' in value)) return onlyKeys(value, ['jsonrpc', 'method', 'params']) ? {} : undefined;
    if (!isId(value.id) || !onlyKeys(value, ['jsonrpc', 'id', 'method', 'params'])) return undefined;
    return { id: value.id, method: value.method, params };
  }
  if ('result' in value)
    return isId(value.id) && isObject(value.result) && onlyKeys(value, ['jsonrpc', 'id', 'result']) ? {} : undefined;
  if ('error' in value) {
    const e = value.error;
    const valid =
      (value.id === undefined || isId(value.id)) &&
      isObject(e) &&
      Number.isInteger(e.code) &&
      typeof e.message === 'string' &&
      onlyKeys(value, ['jsonrpc', 'id', 'error']);
    return valid ? {} : undefined;
  }
  return undefined;
}

export const rpcError = (id: Id | null, code: number, message: string): RpcAnswer => ({
  jsonrpc: '2.0',
  id,
  error: { code, message },
});

const invalidParams = (method: string, expected: string): RpcError =>
  new RpcError(ErrorCode.InvalidParams, `Invalid params for ${method}: ${expected}`);

/** The answer to the request `message` from `caller`. */
export async function answer(
  message: { id: Id; method: string; params?: Params },
  call: GatewayCall,
  caller: McpCaller,
  lookups: () => Promise<Lookups>,
): Promise<RpcAnswer> {
  const { id, method, params = {} } = message;
  const methods = async () => {
    const current = await lookups();
    return mcpMethods(call, caller, () => current);
  };
  try {
    let result: unknown;
    switch (method) {
      case 'initialize': {
        const { protocolVersion, capabilities: client, clientInfo } = params;
        if (
          typeof protocolVersion !== 'string' ||
          !isObject(client) ||
          !isObject(clientInfo) ||
          typeof clientInfo.name !== 'string' ||
          typeof clientInfo.version !== 'string'
        )
          throw invalidParams(method, 'protocolVersion (a string), capabilities and clientInfo {name, version}');
        result = {
          protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(protocolVersion)
            ? protocolVersion
            : SUPPORTED_PROTOCOL_VERSIONS[0],
          capabilities: capabilities(false),
          serverInfo: SERVER_INFO,
          instructions: INSTRUCTIONS,
        };
        break;
      }
      case 'ping':
        result = {};
        break;
      case 'tools/list':
        result = (await methods()).listTools();
        break;
      case 'tools/call': {
        const { name, arguments: args } = params;
        if (typeof name !== 'string' || (args !== undefined && !isObject(args)))
          throw invalidParams(method, 'name (a string) and arguments (an object)');
        result = await (await methods()).callTool({ name, arguments: args });
        break;
      }
      case 'resources/list':
        result = (await methods()).listResources();
        break;
      case 'resources/read': {
        if (typeof params.uri !== 'string') throw invalidParams(method, 'uri (a string)');
        result = await (await methods()).readResource({ uri: params.uri });
        break;
      }
      default:
        return rpcError(id, ErrorCode.MethodNotFound, 'Method not found');
    }
    return { jsonrpc: '2.0', id, result };
  } catch (err) {
    if (err instanceof RpcError) return rpcError(id, err.code, err.message);
    throw err; // the lookup lists out of reach: the HTTP error of the cause (a 503), as for any request
  }
}
