import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type {
  JSONRPCErrorResponse,
  JSONRPCMessage,
  JSONRPCRequest,
  JSONRPCResultResponse,
} from '@modelcontextprotocol/sdk/types.js';
import { callTool, ErrorCode, mcpServer, type McpContext, type RequestExtra } from './server.js';

// One SDK Server answers every MCP request over HTTP, made once: a Server, its handlers and its
// validator made for each request cost more CPU than the tool call they answered.
//
// A Server answers through one transport, and pairs each answer with its request by the JSON-RPC
// id, which the client chooses: two clients' requests with id 1 at the same moment would be one
// request to a shared Server (the second's abort controller replacing the first's, an answer
// going to whichever request was paired first). So requests reach the Server through this
// transport, which gives each one an id of its own, never reused, and hands the answer back to
// the request it belongs to with the client's id again. What a request is answered for (its
// caller, its gateway call, the lookup lists, the tools loaded) goes with it, as the SDK's
// authInfo of that one message, never through the Server's state. Notifications and answers from
// a client are not passed on: over stateless HTTP they name nothing of the Server's (a
// cancellation there names a request by an id of the Server's, which would be another
// client's), and a Server made per request ignored them too.

/** An answer to a request: its result or its error. */
export type RpcAnswer = JSONRPCResultResponse | JSONRPCErrorResponse;

const CONTEXT = 'tally';

/** The context an HTTP request passed with its message. */
function contextOf(extra: RequestExtra): McpContext {
  const context = extra.authInfo?.extra?.[CONTEXT] as McpContext | undefined;
  // Unreachable: every message reaches the Server through answer(), with its context.
  if (!context) throw new Error('an MCP request without its context');
  return context;
}

export class SharedServer implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  /** The requests the Server is answering, by the id it knows them by. */
  private readonly waiting = new Map<number, (answer: RpcAnswer) => void>();
  private lastId = 0;
  private readonly connected: Promise<void>;

  constructor() {
    this.connected = mcpServer(contextOf).connect(this);
  }

  async start(): Promise<void> {}
  async close(): Promise<void> {}

  /** The Server's answer to `request`, made for `context`, with the request's own id. */
  async answer(request: JSONRPCRequest, context: McpContext): Promise<RpcAnswer> {
    const call = plainToolCall(request);
    if (call) return toolCallAnswer(request.id, call, context);
    await this.connected;
    const id = ++this.lastId;
    return new Promise((resolve) => {
      this.waiting.set(id, (answer) => resolve({ ...answer, id: request.id }));
      this.onmessage?.(
        { ...request, id },
        { authInfo: { token: '', clientId: '', scopes: [], extra: { [CONTEXT]: context } } },
      );
    });
  }

  /** What the Server sends: an answer goes to its request; anything else has no one to go to over stateless HTTP. */
  async send(message: JSONRPCMessage): Promise<void> {
    if (!('id' in message) || 'method' in message || typeof message.id !== 'number') return;
    const deliver = this.waiting.get(message.id);
    if (!deliver) return;
    this.waiting.delete(message.id);
    deliver(message);
  }
}

type ToolCall = { name: string; arguments?: Record<string, unknown> };

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The params of a tools/call that has its name and arguments only, as the Server's parse would pass them on unchanged. */
function plainToolCall({ method, params }: JSONRPCRequest): ToolCall | undefined {
  if (method !== 'tools/call' || !isPlainObject(params)) return undefined;
  for (const key in params) if (key !== 'name' && key !== 'arguments') return undefined;
  const { name, arguments: args } = params;
  if (typeof name !== 'string') return undefined;
  if (args === undefined) return { name };
  if (!isPlainObject(args) || Object.hasOwn(args, '__proto__')) return undefined;
  return { name, arguments: args };
}

/** The answer the Server gives a plain tools/call: its handler's result, or what the handler threw, as the Server writes an error. */
async function toolCallAnswer(id: JSONRPCRequest['id'], call: ToolCall, context: McpContext): Promise<RpcAnswer> {
  try {
    return { result: await callTool(context, call), jsonrpc: '2.0', id };
  } catch (err) {
    const { code, message, data } = err as { code?: unknown; message?: string; data?: unknown };
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: typeof code === 'number' && Number.isSafeInteger(code) ? code : ErrorCode.InternalError,
        message: message ?? 'Internal error',
        ...(data !== undefined && { data }),
      },
    };
  }
}
