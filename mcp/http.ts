import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../gateway/context.js';
import type { GatewayCall } from '../gateway/engine/call.js';
import { ApiError, catalogue, INVALID_JSON } from '../gateway/engine/errors.js';
import { bodyReader, parseJson } from '../gateway/body.js';
import { bearerToken } from '../gateway/auth/bearer.js';
import { requestsLeft, takeRequests } from '../gateway/auth/ratelimit.js';
import { oneWorkspaceToken, RecentTokens, serveWorkspaceRequest } from '../gateway/auth/workspace-token.js';
import { header, queryOf, sendBody, sendJson as sendJsonAs, type Exchange, type Handler } from '../gateway/http.js';
import type { LookupCache } from '../gateway/lookups.js';
import {
  answer,
  parseMessage,
  rpcError,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Message,
  type RpcAnswer,
} from './jsonrpc.js';
import { toolErrorText } from './server.js';
import type { McpCaller } from './tools.js';

// The MCP URL is /mcp?token=<workspace token>, or Authorization: Bearer <workspace
// token>. No OAuth: a client registers it with Client ID and Secret left empty. The transport
// is MCP's Streamable HTTP in its stateless JSON-response mode: one POST carries one JSON-RPC
// message and gets its answer as JSON, so any number of Tally processes can serve one client.
//
// A plain node:http handler (the server hands it every request under /mcp before Express,
// through the request shell, gateway/http.ts),
// answering the messages itself (jsonrpc.ts) rather than with the SDK's Server and transport:
// those cost a Server, a transport and a web Request and Response per request, and with
// Express around them an MCP request cost four times the CPU of a /rest/v1 read. What a client
// sees is what the SDK answered (tests/mcp-http.test.ts pins it; the SDK's Client is the
// conformance check). The token is looked up, counted against its rate limit and checked
// against the API switch before any message is looked at; a token this process found valid in
// the last minute is instead checked in the transaction of each of the tool's gateway calls,
// or looked up before the answer goes out (RecentTokens), which saves a tool call a round trip.
// One request is one JSON-RPC message: a batch would run up to 100 tool calls for the price of
// one request, so it is refused (the 2025-06-18 protocol dropped batches; create_expenses is
// the way to write many records at once, and counts each against the limit).

export const MCP_PATH = '/mcp';

const BATCH_REFUSED =
  'JSON-RPC batches are not supported: send one message per request (create_expenses records up to 100 expenses in one call)';

/** MCP clients put the token in the URL; the headers other surfaces read mean nothing here. */
const MCP_TOKEN_HINT =
  'Put the workspace token in the MCP server URL: /mcp?token=tally_ws_… (or send Authorization: Bearer tally_ws_…)';

/** A transport refusal: an HTTP status with a JSON-RPC error that answers no message. */
class Refusal {
  constructor(
    readonly status: number,
    readonly body: RpcAnswer,
    readonly headers: Record<string, string> = {},
  ) {}
}

const refuse = (status: number, code: number, message: string, headers?: Record<string, string>): Refusal =>
  new Refusal(status, rpcError(null, code, message), headers);

/** The workspace token of ?token= or the bearer header; two different ones are refused, as the exchange refuses them. */
function presentedToken(req: IncomingMessage, query: URLSearchParams): string | undefined {
  const bearer = bearerToken(header(req, 'authorization'));
  return oneWorkspaceToken(bearer === undefined ? query.getAll('token') : [...query.getAll('token'), bearer]);
}

/** Tally's own origins: the loopback names at the port this request came in on. */
function ownOrigins(req: IncomingMessage): string[] {
  const port = req.socket.localPort;
  const suffix = port === 80 || port === undefined ? '' : `:${port}`;
  return ['http://localhost', 'http://127.0.0.1', 'http://[::1]'].map((host) => host + suffix);
}

/**
 * Whether a browser may call /mcp from the page that sent this request. A page whose name an
 * attacker made resolve to this server (DNS rebinding) sends its own Origin and would otherwise
 * act with the token in the URL; MCP's transport rule is to refuse it. Served: no Origin (an MCP
 * client that is not a browser), Tally's own origins, and those of TALLY_MCP_ALLOWED_ORIGINS.
 */
function originAllowed(req: IncomingMessage, allowed: ReadonlySet<string>): boolean {
  const origin = req.headers.origin;
  return origin === undefined || allowed.has(origin) || ownOrigins(req).includes(origin);
}

/**
 * The body as JSON, as Express's JSON parser read it before: no body is `{}` (not a message),
 * and anything but an object or array is the 400 of the error shape. The tools work on the
 * arguments' values, so a number a double cannot hold exactly is refused here, naming where it
 * is, rather than changed on its way to the database.
 */
function parseBody(raw: string | undefined): unknown {
  if (raw === undefined || raw === '') return {};
  if (!/^[ \t\n\r]*[{[]/.test(raw)) throw catalogue.invalidBody(INVALID_JSON);
  return parseJson(raw, { exactNumbers: true });
}

/** The JSON-RPC id of a tools/call in the body, when the body is one. */
function toolCallId(body: unknown): string | number | undefined {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const msg = body as { method?: unknown; id?: unknown };
    if (msg.method === 'tools/call' && (typeof msg.id === 'string' || typeof msg.id === 'number')) return msg.id;
  }
  return undefined;
}

/** Whether the Content-Type's media type is application/json (parameters aside). */
function isJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  return contentType.split(';', 1)[0]!.trim().toLowerCase() === 'application/json';
}

/** A JSON answer with the Content-Type the SDK's transport sent (no charset). */
const sendJson = (res: ServerResponse, status: number, body: unknown): void =>
  sendJsonAs(res, status, body, 'application/json');

/** The request's one JSON-RPC message, after the transport's checks of its headers and body; a refusal is thrown. */
function messageOf(req: IncomingMessage, body: unknown): Message {
  if (Array.isArray(body)) throw refuse(400, -32600, BATCH_REFUSED);
  const accept = header(req, 'accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream'))
    throw refuse(406, -32000, 'Not Acceptable: Client must accept both application/json and text/event-stream');
  if (!isJson(header(req, 'content-type')))
    throw refuse(415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
  const message = parseMessage(body);
  if (!message) throw refuse(400, -32700, 'Parse error: Invalid JSON-RPC message');
  const version = header(req, 'mcp-protocol-version');
  if (message.id === undefined || message.method !== 'initialize') {
    if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version))
      throw refuse(
        400,
        -32000,
        `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
      );
  }
  return message;
}

/** Refuses what is not a JSON-RPC POST to /mcp from an allowed page, before its body is read. */
function checkTransport(x: Exchange, allowedOrigins: ReadonlySet<string>): void {
  const { req, path } = x;
  if (path !== MCP_PATH && path !== MCP_PATH + '/') throw catalogue.invalidPath();
  if (!originAllowed(req, allowedOrigins))
    throw refuse(
      403,
      -32000,
      `Forbidden: Origin ${JSON.stringify(req.headers.origin).slice(0, 200)} may not call /mcp (TALLY_MCP_ALLOWED_ORIGINS lists the browser origins that may)`,
    );
  // Stateless: there is no stream to resume (GET) and no session to end (DELETE).
  if (req.method !== 'POST')
    throw refuse(405, -32000, 'Method not allowed: send JSON-RPC messages with POST', { Allow: 'POST' });
}

/**
 * Answers a failure the MCP way where there is one: a transport refusal as its JSON-RPC error,
 * and a rate-limited tools/call (the body is parsed first for this) as a tool result an agent can
 * act on. Anything else, a refused token included, keeps its HTTP status and the one error shape
 * (thrown on to the request shell), before any tool runs.
 */
function answerFailure(res: ServerResponse, err: unknown, body: unknown): void {
  if (res.headersSent) throw err;
  if (err instanceof Refusal) {
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    return sendJson(res, err.status, err.body);
  }
  const id = err instanceof ApiError && err.status === 429 ? toolCallId(body) : undefined;
  if (err instanceof ApiError && id !== undefined) {
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    const text = toolErrorText(err);
    return sendJson(res, 200, { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }], isError: true } });
  }
  if (err instanceof ApiError && err.status === 401 && err.code === 'PGRST302') throw err.withHint(MCP_TOKEN_HINT);
  throw err;
}

export function mcpHandler(ctx: AppContext, lookups: LookupCache): Handler {
  const readBody = bodyReader(ctx.config.maxBodyBytes);
  const allowedOrigins = new Set(ctx.config.mcpAllowedOrigins);
  // Tokens found valid a moment ago, checked again in the transaction of each gateway call.
  const recent = new RecentTokens();

  /** The answer to one authenticated POST whose body is `body`, undefined for none; a refusal is thrown. */
  const serve = async (
    req: IncomingMessage,
    body: unknown,
    caller: McpCaller,
    call: GatewayCall,
  ): Promise<RpcAnswer | undefined> => {
    const message = messageOf(req, body);
    // A notification or a response alone: accepted, nothing to answer.
    if (message.id === undefined) return undefined;
    return answer(message, call, caller, () => lookups.get());
  };

  return async (x) => {
    const { req, res } = x;
    let body: unknown;
    try {
      checkTransport(x, allowedOrigins);
      body = parseBody(await readBody(req, res));
      // A token taken on trust is confirmed before anything is answered (serveWorkspaceRequest).
      const reply = await serveWorkspaceRequest(
        ctx,
        res,
        x.address,
        () => presentedToken(req, queryOf(req)),
        { call: x.call, recent, identified: (known) => (x.auth = known) },
        ({ token, auth, rateKey }, checked) =>
          serve(
            req,
            body,
            {
              auth,
              scope: token.scope,
              charge: (hits) => takeRequests(ctx, rateKey, hits),
              rateLimit: () => requestsLeft(ctx, rateKey),
            },
            checked,
          ),
      );
      if (reply) return sendJson(res, 200, reply);
      res.statusCode = 202;
      sendBody(res, undefined);
    } catch (err) {
      answerFailure(res, err, body);
    }
  };
}
