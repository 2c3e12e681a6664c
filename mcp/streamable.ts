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
  const parsed = JSONRPCMessageSchema.safeParse(body);
  if (!parsed.success) return refused(400, -32700, NOT_JSON_RPC);
  const message = parsed.data;
  // initialize negotiates the version in its params, so its header is not looked at. The method
  // is compared first: the SDK's schema of initialize costs more than every other check here.
  const initialize = 'method' in message && message.method === 'initialize' && isInitializeRequest(message);
  const refusal = initialize ? undefined : versionRefusal(req);
  if (refusal) return refusal;
  return isJSONRPCRequest(message) ? { request: message } : { accepted: true };
}
