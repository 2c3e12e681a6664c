// The pieces of a plain node:http surface (one that answers before Express, server.ts): its
// request headers, its body, and a body sent as it is.

import express from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext } from './engine/call.js';
import { serverTimingOf } from './log.js';

/** A request header as one string (Node joins repeated ones), or undefined. */
export const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Reads a request body as text, whatever its type, up to `limit` bytes: body-parser's reader,
 * so a larger body is the same 413 (PGRST413, errors.ts) as on every surface.
 */
export function bodyReader(limit: number): (req: IncomingMessage, res: ServerResponse) => Promise<string | undefined> {
  const readText = express.text({ type: () => true, limit });
  return (req, res) =>
    new Promise((resolve, reject) =>
      readText(req as never, res as never, (err?: unknown) =>
        err ? reject(err) : resolve((req as { body?: unknown }).body as string | undefined),
      ),
    );
}

/** Ends a response with the body as it is (JSON or CSV text as Postgres serialised it), and its Server-Timing. */
export function sendBody(res: ServerResponse, auth: AuthContext | undefined, body: string | undefined): void {
  const timing = serverTimingOf(auth);
  if (timing) res.setHeader('Server-Timing', timing);
  if (body === undefined) return void res.end();
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body); // no body goes out for HEAD: node:http leaves it off
}
