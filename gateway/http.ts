// The one request shell: every request the server answers, whichever surface answers it (a
// plain node:http handler or Express), goes through serve() below, which does once what every
// surface needs: the path check, the client address, the request log line, Server-Timing from
// the database time of the request's gateway calls, and anything thrown in the one error shape.
// A surface gets the request as an Exchange; bodies are read by body.ts. Also the small pieces
// the node:http surfaces share: CORS, the query string, a header, a body sent as it is.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { clientAddress } from './auth/address.js';
import type { AuthContext, GatewayCall, GatewayTiming } from './engine/call.js';
import { ApiError, catalogue, writeError } from './errors.js';
import { log } from './log.js';
import { Sending, type Held, type SendLimits } from './sending.js';

/** Answers one request that the shell has taken in (thrown errors are answered by the shell). */
export type Handler = (x: Exchange) => Promise<void> | void;

const EXCHANGE = Symbol('exchange');

/** One request and what its surface learns of it: its caller, and the database time it took. */
export class Exchange {
  /** The request's path as it arrived, without its query string (Express rewrites req.url as it routes). */
  readonly path: string;
  /** The caller, once the surface's authentication step knows it: for the log line. */
  auth: AuthContext | undefined;
  /** The database time of the request's gateway calls so far (GatewayResponse.timing, ApiError.timing). */
  timing: GatewayTiming | undefined;
  readonly start = process.hrtime.bigint();
  /** What its answer holds of the server's sending bounds (sending.ts); undefined when it was not admitted. */
  held: Held | undefined;
  #address: string | undefined | null = null;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly gateway: GatewayCall,
    private readonly trustProxy: boolean,
    private readonly sending: Sending,
  ) {
    this.path = pathOf(req);
  }

  /** Counts an answer's body against the client address's bytes waiting to be sent (sending.ts); throws its 429. */
  reserveSend(bytes: number): void {
    if (this.held) this.sending.reserve(this.held, this.address, bytes);
  }

  /** The client's address (auth/address.ts): the socket's peer, or behind a trusted proxy the one it names. */
  get address(): string | undefined {
    if (this.#address === null) this.#address = clientAddress(this.req, this.trustProxy);
    return this.#address;
  }

  /** The gateway call, its database time counted for this request's Server-Timing and log line. */
  readonly call: GatewayCall = async (request, auth) => {
    try {
      const response = await this.gateway(request, auth);
      this.addTiming(response.timing);
      return response;
    } catch (err) {
      if (err instanceof ApiError) this.addTiming(err.timing);
      throw err;
    }
  };

  /**
   * Adds a call's database time, and says it in Server-Timing: a header set now is written with
   * the answer, whoever writes it (a surface, Express, the error writer).
   */
  private addTiming(timing: GatewayTiming | undefined): void {
    if (timing === undefined) return;
    if (this.timing) {
      this.timing.poolMs += timing.poolMs;
      this.timing.dbMs += timing.dbMs;
    } else this.timing = { poolMs: timing.poolMs, dbMs: timing.dbMs };
    if (!this.res.headersSent) this.res.setHeader('Server-Timing', this.serverTiming()!);
  }

  /** The Server-Timing value: waiting for a pooled connection, then the transactions; undefined for none. */
  serverTiming(): string | undefined {
    const t = this.timing;
    return t ? `pool;dur=${fixed2(t.poolMs)}, db;dur=${fixed2(t.dbMs)}` : undefined;
  }
}

/**
 * A duration in milliseconds with two decimals, without toFixed's runtime call: rounded half up
 * (toFixed rounds the binary value, so 0.015 is "0.01" there and "0.02" here). Never negative.
 */
function fixed2(ms: number): string {
  const hundredths = Math.round(Math.max(0, ms) * 100);
  const cents = hundredths % 100;
  return `${(hundredths - cents) / 100}.${cents < 10 ? '0' : ''}${cents}`;
}

/** The Exchange of a request the shell took in: how an Express surface reaches it. */
export function exchangeOf(req: IncomingMessage): Exchange {
  const x = (req as { [EXCHANGE]?: Exchange })[EXCHANGE];
  if (!x) throw new Error('a request outside the request shell (gateway/http.ts serve)');
  return x;
}

/** No bound on sending: for a listener a test makes of the shell alone. */
const UNBOUNDED: SendLimits = { httpSendTimeoutMs: 0, httpSendBytesPerAddress: 0, httpPipelineDepth: Infinity };

/**
 * The server's request listener: each request taken in as an Exchange, then answered by
 * `handle`. First, a connection with `limits.httpPipelineDepth` requests in flight is answered
 * 429 and closed, and every answer gets its send deadline (sending.ts). Before `handle`, a
 * malformed percent-escape in the path is the 400 every surface gives (routers decode paths for
 * their parameters, and would make it a 500); after it, when the response has been sent, the
 * request log line. Server-Timing is set as each gateway call returns (Exchange.call), so it is
 * on every answer that ran a database transaction, errors included, whoever wrote it.
 */
export function serve(gateway: GatewayCall, trustProxy: boolean, handle: Handler, limits: SendLimits = UNBOUNDED) {
  const sending = new Sending(limits);
  return (req: IncomingMessage, res: ServerResponse): void => {
    const x = new Exchange(req, res, gateway, trustProxy, sending);
    (req as { [EXCHANGE]?: Exchange })[EXCHANGE] = x;
    const held = (x.held = sending.admit(req, res));
    // One listener for all the shell keeps until the response closes ('close' comes after
    // 'finish', or without it when the connection went first): a listener each cost every request.
    res.on('close', () => {
      if (held) sending.release(held);
      if (res.writableFinished) logRequest(x);
    });
    if (!held) return;
    const run = async (): Promise<void> => {
      if (x.path.includes('%')) {
        try {
          decodeURIComponent(x.path);
        } catch {
          throw catalogue.pathEncoding();
        }
      }
      await handle(x);
    };
    run().catch((err: unknown) => writeError(res, err));
  };
}

/**
 * The request log line: method, route (the path without its query string, which may carry
 * ?token=), status, duration, database time and the workspace of the caller when known.
 */
function logRequest(x: Exchange): void {
  const workspace = x.auth?.claims?.workspace_id;
  log.info(
    {
      method: x.req.method,
      route: x.path,
      status: x.res.statusCode,
      duration_ms: Number(process.hrtime.bigint() - x.start) / 1e6,
      db_ms: x.timing?.dbMs,
      workspace_id: typeof workspace === 'string' ? workspace : undefined,
    },
    'request',
  );
}

/**
 * Cross-origin access to a JWT surface, as PostgREST grants it: any origin, no credentials
 * (the surfaces take bearer tokens, never cookies), for a request that names its Origin. A
 * preflight (OPTIONS with Access-Control-Request-Method) is answered here, 200 without a body and
 * before any apikey or JWT, which browsers do not send with it; returns true then. Every other
 * request with an Origin gets the headers a browser needs to read its answer, errors included.
 */
export function answerCors(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.headers.origin === undefined) return false;
  res.setHeader('Access-Control-Allow-Origin', '*');
  if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
    const asked = header(req, 'access-control-request-headers');
    res.statusCode = 200;
    res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD');
    res.setHeader('Access-Control-Allow-Headers', asked ? `Authorization, ${asked}` : 'Authorization');
    res.setHeader('Access-Control-Max-Age', '86400');
    res.end();
    return true;
  }
  res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSED);
  return false;
}

/** The response headers a cross-origin script may read (PostgREST's list). */
const CORS_EXPOSED =
  'Content-Encoding, Content-Location, Content-Range, Content-Type, Date, Location, Server, Transfer-Encoding, Range-Unit, Idempotent-Replayed, ETag, Tally-Changes, Tally-Activity-Id, Tally-Request-Id';

/** A request's path, without its query string. */
function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q >= 0 ? url.slice(0, q) : url;
}

/**
 * A request's query string, every key in order (repeated ones kept), as the gateway's grammar
 * wants it. A malformed escape (`%zz`, or bytes that are not UTF-8) is a 400: URLSearchParams
 * would keep it as literal text or put U+FFFD in its place, and a filter would use that.
 */
export function queryOf(req: IncomingMessage): URLSearchParams {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const query = q >= 0 ? url.slice(q + 1) : '';
  if (query.includes('%')) {
    try {
      decodeURIComponent(query);
    } catch {
      throw catalogue.queryEncoding();
    }
  }
  return new URLSearchParams(query);
}

/** A request header as one string (Node joins repeated ones), or undefined. */
export const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Ends a response with the body as it is (JSON or CSV text as Postgres serialised it). A body
 * the client address has no room for (sending.ts) is not sent: the 429 is thrown instead, the
 * answer's own headers taken off first (a CORS header and the rate limit's stay).
 */
export function sendBody(res: ServerResponse, body: string | undefined): void {
  if (body === undefined) return void res.end();
  const bytes = Buffer.byteLength(body);
  if (res.req.method !== 'HEAD') {
    try {
      (res.req as { [EXCHANGE]?: Exchange })[EXCHANGE]?.reserveSend(bytes);
    } catch (err) {
      for (const name of res.getHeaderNames())
        if (!/^(access-control-|ratelimit|server-timing$)/.test(name)) res.removeHeader(name);
      throw err;
    }
  }
  res.setHeader('Content-Length', bytes);
  res.end(body); // no body goes out for HEAD: node:http leaves it off
}

/** Ends a response with a value as JSON (`type`: the Content-Type, for a protocol that fixes it). */
export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  type = 'application/json; charset=utf-8',
): void {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  sendBody(res, JSON.stringify(value));
}
