import type { IncomingMessage } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import {
  isInitializeRequest,
  isJSONRPCRequest,
  JSONRPCMessageSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { header } from '../gateway/http.js';

// What the SDK's Streamable HTTP transport in its stateless JSON-response mode
// (WebStandardStreamableHTTPServerTransport with enableJsonResponse) does with one POSTed message
// whose body is already parsed, in its order and in its words: the Accept header (406), the
// Content-Type (415), the message's JSON-RPC shape (400, -32700, by the SDK's own schema), and,
// for anything but initialize, the MCP-Protocol-Version header (400). A notification or a
// response is accepted with nothing to answer (202); a request is handed on. The SDK's transport
// did the same, but only after a web-standard Request had been made of node's (its Headers, URL
// and AbortSignal) and a transport of its own for every request: more CPU than the checks.
// Without sessions nothing else of it applies (no session id to check, no stream).

/** A refusal of the transport: its HTTP status and the JSON-RPC error it answers. */
interface TransportRefusal {
  status: number;
  code: number;
  message: string;
}

/** What becomes of a message: refused, accepted with nothing to answer, or a request to answer. */
export type Transported = { refused: TransportRefusal } | { accepted: true } | { request: JSONRPCRequest };

const refused = (status: number, code: number, message: string): Transported => ({
  refused: { status, code, message },
});

const NOT_ACCEPTABLE = 'Not Acceptable: Client must accept both application/json and text/event-stream';
const NOT_JSON = 'Unsupported Media Type: Content-Type must be application/json';
const NOT_JSON_RPC = 'Parse error: Invalid JSON-RPC message';

/** The SDK's check of the protocol version header: absent, or one it supports. */
function versionRefusal(req: IncomingMessage): Transported | undefined {
  const version = header(req, 'mcp-protocol-version');
  if (version === undefined || SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return undefined;
  return refused(
    400,
    -32000,
    `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
  );
}

/** What the SDK's stateless transport does with `body` (one message, not a batch) POSTed as `req`. */
export function transported(req: IncomingMessage, body: unknown): Transported {
  // Accept is a list: the SDK looks for both names in it, as text.
  const accept = header(req, 'accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream'))
    return refused(406, -32000, NOT_ACCEPTABLE);
  if (!isJsonContentType(header(req, 'content-type'))) return refused(415, -32000, NOT_JSON);
  const plain = plainRequest(body);
  const message = plain ?? JSONRPCMessageSchema.safeParse(body).data;
  if (message === undefined) return refused(400, -32700, NOT_JSON_RPC);
  // initialize negotiates the version in its params, so its header is not looked at. The method
  // is compared first: the SDK's schema of initialize costs more than every other check here.
  const initialize = 'method' in message && message.method === 'initialize' && isInitializeRequest(message);
  const refusal = initialize ? undefined : versionRefusal(req);
  if (refusal) return refusal;
  const request = plain ?? (isJSONRPCRequest(message) ? message : undefined);
  return request ? { request } : { accepted: true };
}

const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A request the SDK's schema passes as it is, checked without it: the request's members only,
 * version 2.0, an id that is a string or a safe integer, a method, and params that are an object
 * without _meta (the one member of params the schema reads) or none. Anything else, valid or
 * not, is the schema's to judge. The schema costs more than the rest of the transport's checks.
 */
function plainRequest(body: unknown): JSONRPCRequest | undefined {
  if (!isObject(body)) return undefined;
  for (const key in body) if (!REQUEST_MEMBERS.has(key)) return undefined;
  const { jsonrpc, id, method, params } = body;
  if (jsonrpc !== '2.0' || typeof method !== 'string') return undefined;
  if (typeof id !== 'string' && !Number.isSafeInteger(id)) return undefined;
  if (
    params !== undefined &&
    (!isObject(params) || Object.hasOwn(params, '_meta') || Object.hasOwn(params, '__proto__'))
  )
    return undefined;
  return body as JSONRPCRequest;
}
