// Request bodies, read one way on every surface: /rest/v1, /api/v1 and /mcp read text (and JSON)
// with bodyReader, the token exchange its optional JSON and the settings pages their forms with
// the readers below, which are built on it. So a body over a limit, in a coding or charset the
// server does not decode, not valid in its charset, or cut short by its client is the same 4xx
// in the one error shape wherever it is sent, and no surface parses bodies of its own.

import express from 'express';
import { isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { catalogue, type ApiError } from './errors.js';
import { parseJsonText } from './engine/request/json.js';

/** Reads one request's body as text; undefined when it has none. */
export type BodyReader = (req: IncomingMessage, res: ServerResponse) => Promise<string | undefined>;

/**
 * Reads a request body as text, whatever its type, up to `limit` bytes: body-parser's reader
 * (for its Content-Encodings and charsets), its refusals turned into the catalogue's at once
 * (bodyError). Text that is not valid in its charset is a 400: decoding it would put U+FFFD
 * where the client's bytes were, and store that. The common body, plain UTF-8 of a declared
 * length within the limit, is read by plainBody below with the same outcome: body-parser's
 * content-type parsing, charset decoder and stream handling were about 7% of the CPU of a
 * one-row POST.
 */
export function bodyReader(limit: number): BodyReader {
  const readBytes = express.raw({ type: () => true, limit });
  return (req, res) =>
    plainBody(req, limit) ??
    new Promise((resolve, reject) =>
      readBytes(req as never, res as never, (err?: unknown) => {
        if (err) return reject(bodyError(err));
        const body = (req as { body?: unknown }).body;
        try {
          resolve(Buffer.isBuffer(body) ? decodeText(body, charsetOf(req.headers['content-type'])) : undefined);
        } catch (decodeErr) {
          reject(decodeErr);
        }
      }),
    );
}

/**
 * body-parser's refusals (http-errors with a `type` and a 4xx `status`) as the catalogue's: a
 * body over the limit, one in a Content-Encoding it does not decode, and one that cannot be
 * read as sent (a gzip body that is not gzip, fewer bytes than its Content-Length).
 */
function bodyError(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return err;
  const { type, status, expose } = err as { type?: unknown; status?: unknown; expose?: unknown };
  if (type === 'entity.too.large') return catalogue.bodyTooLarge();
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') return catalogue.unsupportedBodyCoding();
  if (status === 400 && expose === true) return unreadable();
  return err;
}

/** A body that could not be read as sent: all the client's doing, a 400. */
const unreadable = (): ApiError =>
  catalogue.invalidBody(
    'Invalid request body: it could not be read as sent',
    null,
    'Check that a Content-Encoding names how the body is really encoded and that Content-Length is its size',
  );

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
    throw catalogue.unsupportedBodyCoding();
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
  if (req.destroyed) return Promise.reject(unreadable());
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
      if (received !== length) return reject(unreadable());
      const bytes = Buffer.concat(chunks, received);
      if (!isUtf8(bytes)) return reject(notText('utf-8'));
      const text = bytes.toString('utf8');
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    // A client that goes before the end of its body: Node destroys the request with an error
    // (ECONNRESET), then closes it. It is the client's doing, a 400, not a lost database.
    const onGone = () => {
      done();
      reject(unreadable());
    };
    req.on('data', onData).once('end', onEnd).once('error', onGone).once('close', onGone);
  });
}

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

/** The media type of a request's Content-Type, lower case, without parameters; '' for none. */
function mediaTypeOf(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/** Whether a request says it has a body (type-is's hasBody, as body-parser asks it). */
const hasBody = (req: IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined || !isNaN(Number(req.headers['content-length'] ?? NaN));

/**
 * An optional JSON body (the token exchange): undefined unless the request says it sends
 * application/json; then no text is `{}`, and anything else is parseJson's value or its 400.
 */
export function optionalJsonReader(limit: number): (req: IncomingMessage, res: ServerResponse) => Promise<unknown> {
  const read = bodyReader(limit);
  return async (req, res) => {
    if (!hasBody(req) || mediaTypeOf(req) !== 'application/json') return undefined;
    const text = await read(req, res);
    return text === undefined || text === '' ? {} : parseJson(text);
  };
}

/** A form's fields: one value per name, or every value of a name sent more than once. */
export type FormFields = Record<string, string | string[]>;

/**
 * The fields of an application/x-www-form-urlencoded body (the settings pages), undefined for a
 * request that sends none: at most `maxFields` of them (more is the 413 of a body over its
 * limit), in an object without a prototype, so `__proto__` or `constructor` are fields like any
 * other.
 */
export function formReader(
  limit: number,
  maxFields: number,
): (req: IncomingMessage, res: ServerResponse) => Promise<FormFields | undefined> {
  const read = bodyReader(limit);
  return async (req, res) => {
    if (!hasBody(req) || mediaTypeOf(req) !== 'application/x-www-form-urlencoded') return undefined;
    const fields: FormFields = Object.create(null) as FormFields;
    const params = new URLSearchParams((await read(req, res)) ?? '');
    let count = 0;
    for (const [name, value] of params) {
      if (++count > maxFields) throw catalogue.bodyTooLarge();
      const known = fields[name];
      fields[name] = known === undefined ? value : [...(Array.isArray(known) ? known : [known]), value];
    }
    return fields;
  };
}
