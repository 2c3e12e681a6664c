// The pieces of a plain node:http surface (one that answers before Express, server.ts): the
// request itself (the log line, the path check, errors), its headers, its body, and a body
// sent as it is. /rest/v1 and /api/v1 are both built from them.

import express from 'express';
import { isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext } from './engine/call.js';
import { catalogue } from './engine/errors.js';
import { parseJsonText } from './engine/request/json.js';
import { writeError } from './error-response.js';
import { logRequest, serverTimingOf } from './log.js';

/** What a request has learned of its caller so far: for the log line and Server-Timing. */
export interface Caller {
  auth?: AuthContext;
}

/**
 * Answers one request with `run`, given its path (without the query string) and its Caller,
 * whose `auth` `run` sets once authenticated: the request log line when the response ends, a
 * malformed percent-escape in the path as the 400 every surface gives (before anything else),
 * and anything thrown in the one error shape, with the Server-Timing of what ran.
 */
export function serveRequest(
  req: IncomingMessage,
  res: ServerResponse,
  run: (path: string, caller: Caller) => Promise<void>,
): void {
  const start = process.hrtime.bigint();
  const path = pathOf(req);
  const caller: Caller = {};
  res.once('finish', () => logRequest(req, path, res.statusCode, start, caller.auth));
  const handle = async (): Promise<void> => {
    try {
      decodeURIComponent(path);
    } catch {
      throw catalogue.pathEncoding();
    }
    await run(path, caller);
  };
  handle().catch((err: unknown) => {
    const timing = serverTimingOf(caller.auth);
    if (timing && !res.headersSent) res.setHeader('Server-Timing', timing);
    writeError(res, err);
  });
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
  'Content-Encoding, Content-Location, Content-Range, Content-Type, Date, Location, Server, Transfer-Encoding, Range-Unit';

/** A request's path, without its query string. */
export function pathOf(req: IncomingMessage): string {
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
 * Reads a request body as text, whatever its type, up to `limit` bytes: body-parser's reader,
 * so a larger body is the same 413 (PGRST413, errors.ts) as on every surface, and a body in a
 * Content-Encoding or charset it does not read the same 415. Text that is not valid in its
 * charset is a 400: decoding it would put U+FFFD where the client's bytes were, and store that.
 * The common body, plain UTF-8 of a declared length within the limit, is read by plainBody
 * below with the same outcome: body-parser's content-type parsing, charset decoder and stream
 * handling were about 7% of the CPU of a one-row POST.
 */
export function bodyReader(limit: number): (req: IncomingMessage, res: ServerResponse) => Promise<string | undefined> {
  const readBytes = express.raw({ type: () => true, limit });
  return (req, res) =>
    plainBody(req, limit) ??
    new Promise((resolve, reject) =>
      readBytes(req as never, res as never, (err?: unknown) => {
        if (err) return reject(err);
        const body = (req as { body?: unknown }).body;
        try {
          resolve(Buffer.isBuffer(body) ? decodeText(body, charsetOf(req.headers['content-type'])) : undefined);
        } catch (decodeErr) {
          reject(decodeErr);
        }
      }),
    );
}

/** The charset parameter of a Content-Type, lower case; UTF-8 when there is none. */
function charsetOf(contentType: string | undefined): string {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '');
  return (m?.[1] ?? 'utf-8').toLowerCase();
}

/** Bytes as text in a charset: an unknown charset is a 415, bytes not valid in it a 400. */
function decodeText(bytes: Buffer, charset: string): string {
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset, { fatal: true });
  } catch {
    throw Object.assign(new Error(`unsupported charset "${charset.toUpperCase()}"`), {
      status: 415,
      statusCode: 415,
      expose: true,
      type: 'charset.unsupported',
    });
  }
  try {
    return decoder.decode(bytes);
  } catch {
    throw notText(charset);
  }
}

/** A body whose bytes are not text in its charset. */
const notText = (charset: string) =>
  catalogue.invalidBody(`Invalid request body: the body is not valid ${charset.toUpperCase()} text`);

/** A charset parameter body-parser would decode as UTF-8, or none (UTF-8 is its default). */
const UTF8_OR_NO_CHARSET = /^[^;]*(;\s*charset\s*=\s*"?utf-?8"?\s*)?$/i;

/**
 * The body of a request that declares its length (within `limit`), no Content-Encoding and no
 * charset but UTF-8, read as body-parser reads it: UTF-8, a leading byte-order mark dropped, and
 * a client that stops before its Content-Length the same 400. Undefined for any other request.
 */
function plainBody(req: IncomingMessage, limit: number): Promise<string> | undefined {
  const { 'content-length': declared, 'content-encoding': coding, 'transfer-encoding': chunked } = req.headers;
  if (declared === undefined || chunked !== undefined || !/^\d{1,15}$/.test(declared)) return undefined;
  const length = Number(declared);
  if (length > limit || (coding !== undefined && coding.toLowerCase() !== 'identity')) return undefined;
  if (!UTF8_OR_NO_CHARSET.test(req.headers['content-type'] ?? '')) return undefined;
  // A client gone before the body was asked for (during authentication): no event will come.
  if (req.destroyed) return Promise.reject(unreadable('request aborted', 'aborted'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const done = () => {
      req.off('data', onData).off('end', onEnd).off('error', onGone).off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      if (received !== length) return reject(unreadable('request size did not match content length', 'size.invalid'));
      const bytes = Buffer.concat(chunks, received);
      if (!isUtf8(bytes)) return reject(notText('utf-8'));
      const text = bytes.toString('utf8');
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    // A client that goes before the end of its body: Node destroys the request with an error
    // (ECONNRESET), then closes it. It is the client's doing, a 400, not a lost database.
    const onGone = () => {
      done();
      reject(unreadable('request aborted', 'aborted'));
    };
    req.on('data', onData).once('end', onEnd).once('error', onGone).once('close', onGone);
  });
}

/** A body that could not be read as sent, as raw-body (body-parser's reader) reports it: a 400. */
const unreadable = (message: string, type: string) =>
  Object.assign(new Error(message), { status: 400, statusCode: 400, expose: true, type: `request.${type}` });

/** Whether a Content-Type names JSON: application/json or a +json type; no header counts as JSON. */
export function isJson(contentType: string | undefined): boolean {
  const [mediaType = ''] = (contentType ?? 'application/json').split(';');
  const type = mediaType.trim().toLowerCase();
  return type === 'application/json' || type.endsWith('+json');
}

/**
 * A JSON body's value, read as the engine reads one (engine/request/json.ts): malformed JSON, an
 * object with a key twice and (with exactNumbers) a number a double cannot hold are the 400
 * (PGRST102) that every surface gives for them.
 */
export const parseJson = parseJsonText;

/** Ends a response with the body as it is (JSON or CSV text as Postgres serialised it), and its Server-Timing. */
export function sendBody(res: ServerResponse, auth: AuthContext | undefined, body: string | undefined): void {
  const timing = serverTimingOf(auth);
  if (timing) res.setHeader('Server-Timing', timing);
  if (body === undefined) return void res.end();
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body); // no body goes out for HEAD: node:http leaves it off
}

/** Ends a response with a value as JSON (`type`: the Content-Type, for a protocol that fixes it). */
export function sendJson(
  res: ServerResponse,
  auth: AuthContext | undefined,
  status: number,
  value: unknown,
  type = 'application/json; charset=utf-8',
): void {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  sendBody(res, auth, JSON.stringify(value));
}
