import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../gateway/context.js';
import { ApiError, catalogue } from '../gateway/errors.js';
import { bodyReader, parseJson } from '../gateway/body.js';
import { bearerToken } from '../gateway/auth/bearer.js';
import { requestsLeft, takeRequests } from '../gateway/auth/ratelimit.js';
import { oneWorkspaceToken, RecentTokens, serveWorkspaceRequest } from '../gateway/auth/workspace-token.js';
import { header, queryOf, sendBody, sendJson as sendJsonAs, type Exchange, type Handler } from '../gateway/http.js';
import type { LookupCache } from '../gateway/lookups.js';
import { SharedServer, type RpcAnswer } from './requests.js';
import { ErrorCode, paramsRefusal, toolErrorText, type McpContext } from './server.js';
import { transported } from './streamable.js';
import { selectedTools } from './tools.js';

// The MCP URL is /mcp?token=<workspace token>, or Authorization: Bearer <workspace
// token>. No OAuth: a client registers it with Client ID and Secret left empty. The transport
// is MCP's Streamable HTTP in its stateless JSON-response mode: one POST carries one JSON-RPC
// message and gets its answer as JSON, so any number of Tally processes can serve one client.
//
// The messages are the SDK's to answer, as over stdio: the one Server of the process
// (requests.ts) answers each request with the caller's context. Before it, the checks of the
// SDK's stateless transport (streamable.ts: Accept, Content-Type, the message's shape and the
// protocol version header, in its words; a notification answered 202), made here rather than by
// a transport of the SDK's built for each request. The answer is written here only once the
// token is confirmed (serveWorkspaceRequest: a token this process found valid in the last minute
// is checked in the transaction of each of the tool's gateway calls, or looked up before the
// answer goes out), which the SDK's node transport, writing to the response itself, could not
// wait for. What stays Tally's own, before the transport's checks: the path; the Origin check
// (Tally's own origins are those of the port the request came in on, which the SDK's fixed list
// cannot say); POST only (the stateless transport would hold a GET open as an event stream); the
// body, read within the body limit and parsed with numbers a double holds exactly (the SDK's
// JSON.parse would change them on their way to the database); a batch refused (the SDK runs up
// to 100 messages of one request: 100 tool calls for the price of one request; create_expenses
// is the way to write many records, and counts each against the limit); and the token, counted
// against its rate limit and checked against the API switch before any message is looked at.

export const MCP_PATH = '/mcp';

const BATCH_REFUSED =
  'JSON-RPC batches are not supported: send one message per request (create_expenses records up to 100 expenses in one call)';

/** MCP clients put the token in the URL; the headers other surfaces read mean nothing here. */
const MCP_TOKEN_HINT =
  'Put the workspace token in the MCP server URL: /mcp?token=tally_ws_… (or send Authorization: Bearer tally_ws_…)';

/** A JSON-RPC error answer of the transport. */
interface RpcRefusal {
  jsonrpc: '2.0';
  id: string | number | null;
  error: { code: number; message: string };
}

const rpcError = (id: string | number | null, code: number, message: string): RpcRefusal => ({
  jsonrpc: '2.0',
  id,
  error: { code, message },
});

/** A transport refusal: an HTTP status with a JSON-RPC error that answers no message. */
class Refusal {
  constructor(
    readonly status: number,
    readonly body: RpcRefusal,
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
 * The body as JSON: no body is `{}` (not a message: the SDK says so). Text that is not JSON, or
 * not an object or array, is a parse error (-32700). The tools work on the arguments' values, so
 * a number a double cannot hold exactly is refused here, naming where it is, rather than changed
 * on its way to the database: invalid params (-32602) of that message. The body is parsed once;
 * only a refused one is parsed again, to say which of these it is.
 */
function parseBody(raw: string | undefined): unknown {
  if (raw === undefined || raw === '') return {};
  let body: unknown;
  try {
    body = parseJson(raw, { exactNumbers: true });
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    throw bodyRefusal(raw, err);
  }
  if (typeof body !== 'object' || body === null)
    throw refuse(400, ErrorCode.ParseError, 'Parse error: Invalid JSON-RPC message');
  return body;
}

/** The refusal of a body the exact parse refused with `err`: not JSON, no message, or the message's invalid params. */
function bodyRefusal(raw: string, err: ApiError): Refusal {
  let loose: unknown;
  try {
    loose = JSON.parse(raw);
  } catch {
    return refuse(400, ErrorCode.ParseError, 'Parse error: Invalid JSON');
  }
  if (typeof loose !== 'object' || loose === null)
    return refuse(400, ErrorCode.ParseError, 'Parse error: Invalid JSON-RPC message');
  const id = (loose as { id?: unknown }).id;
  const known = typeof id === 'string' || typeof id === 'number' ? id : null;
  return new Refusal(400, rpcError(known, ErrorCode.InvalidParams, toolErrorText(err)));
}

/** The query parameters of the /mcp URL. */
const MCP_PARAMETERS = ['token', 'toolsets', 'read_only'];

/**
 * The tools this URL loads: ?toolsets=expenses,funds (areas, comma-separated or repeated; all
 * when none) and ?read_only=true (the read tools only); undefined for every tool. Another
 * parameter is refused: ?read-only=true (the CLI's spelling) or ?readOnly=true was ignored, and
 * loaded the write tools of a write token unnoticed.
 */
function loadedTools(query: URLSearchParams): ReadonlySet<string> | undefined {
  const unknown = [...query.keys()].find((name) => !MCP_PARAMETERS.includes(name));
  if (unknown !== undefined)
    throw refuse(
      400,
      ErrorCode.InvalidParams,
      `Unknown query parameter ${JSON.stringify(unknown).slice(0, 100)}: the /mcp URL takes ${MCP_PARAMETERS.join(', ')}`,
    );
  const toolsets = query
    .getAll('toolsets')
    .flatMap((v) => v.split(','))
    .filter((v) => v !== '');
  // Once at most: with read_only=false&read_only=true the first was taken, so a URL given
  // read_only=true at its end (by whoever hands it to an agent) still loaded the write tools.
  const [readOnly = null, ...more] = query.getAll('read_only');
  if (more.length > 0) throw refuse(400, ErrorCode.InvalidParams, 'read_only must be given once');
  if (toolsets.length === 0 && readOnly === null) return undefined;
  if (readOnly !== null && readOnly !== 'true' && readOnly !== 'false')
    throw refuse(
      400,
      ErrorCode.InvalidParams,
      `read_only must be true or false, not ${JSON.stringify(readOnly).slice(0, 100)}`,
    );
  try {
    return selectedTools({ toolsets, readOnly: readOnly === 'true' });
  } catch (err) {
    throw refuse(400, ErrorCode.InvalidParams, (err as Error).message.slice(0, 300));
  }
}

/**
 * A body the reader refused (not as sent, over the limit, in a Content-Encoding or charset it
 * does not decode) as a JSON-RPC error, with the reader's status and headers (a 415's
 * Accept-Encoding): the error a host shows its agent.
 */
function unreadable(err: unknown): never {
  if (err instanceof ApiError && err.status === 400)
    throw refuse(400, ErrorCode.ParseError, `Parse error: ${err.message}`);
  if (err instanceof ApiError && (err.status === 413 || err.status === 415))
    throw refuse(err.status, -32000, toolErrorText(err), err.headers);
  throw err;
}

/** The JSON-RPC id of a tools/call in the body, when the body is one. */
function toolCallId(body: unknown): string | number | undefined {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const msg = body as { method?: unknown; id?: unknown };
    if (msg.method === 'tools/call' && (typeof msg.id === 'string' || typeof msg.id === 'number')) return msg.id;
  }
  return undefined;
}

/** A JSON answer with the Content-Type the SDK's transport sends (no charset). */
const sendJson = (res: ServerResponse, status: number, body: unknown): void =>
  sendJsonAs(res, status, body, 'application/json');

/** Writes the answer to a request, or 202 with no body for a message that has none. */
function send(res: ServerResponse, answer: RpcAnswer | undefined): void {
  if (answer !== undefined) return sendJson(res, 200, answer);
  res.statusCode = 202;
  sendBody(res, undefined);
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
  const server = new SharedServer();

  /**
   * The answer to one authenticated POST whose body is `body`: the Server's answer to its request,
   * or undefined for a notification or a response (202). The transport's checks (streamable.ts)
   * refuse what the SDK's stateless transport refused, with its status and error.
   */
  const serve = async (req: IncomingMessage, body: unknown, context: McpContext): Promise<RpcAnswer | undefined> => {
    if (Array.isArray(body)) throw refuse(400, ErrorCode.InvalidRequest, BATCH_REFUSED);
    const message = transported(req, body);
    if ('refused' in message) throw refuse(message.refused.status, message.refused.code, message.refused.message);
    if ('accepted' in message) return undefined;
    return paramsRefusal(message.request) ?? server.answer(message.request, context);
  };

  return async (x) => {
    const { req, res } = x;
    let body: unknown;
    try {
      checkTransport(x, allowedOrigins);
      const query = queryOf(req);
      const loaded = loadedTools(query);
      body = parseBody(await readBody(req, res).catch(unreadable));
      // A token taken on trust is confirmed before anything is answered (serveWorkspaceRequest).
      const reply = await serveWorkspaceRequest(
        ctx,
        res,
        x.address,
        () => presentedToken(req, query),
        { call: x.call, recent, identified: (known) => (x.auth = known) },
        async ({ token, auth, rateKey }, checked) =>
          serve(req, body, {
            call: checked,
            caller: {
              auth,
              scope: token.scope,
              charge: (hits) => takeRequests(ctx, rateKey, hits),
              rateLimit: () => requestsLeft(ctx, rateKey),
            },
            lookups: await lookups.get(),
            loaded,
          }),
      );
      send(res, reply);
    } catch (err) {
      answerFailure(res, err, body);
    }
  };
}
