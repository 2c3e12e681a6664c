import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from './auth/address.js';
import type { SendLimits } from './sending.js';
import { catalogue } from './errors.js';

// What one client address may hold of the server, before any request of it is read: a bounded
// number of open connections, and a bounded time to send its headers and its whole request.
// Without them, idle connections from one address reached the process's file-descriptor limit
// (about 20,000), and then nobody could connect and the pool could not reconnect to Postgres; a
// client sending a header or a body one byte at a time kept its connection for minutes.

export interface HttpLimits extends SendLimits {
  /** Time from a connection's first byte (or its previous response) to the end of a request's headers. */
  httpHeadersTimeoutMs: number;
  /** Time to receive a whole request, headers and body. */
  httpRequestTimeoutMs: number;
  /** Open connections per client address (an IPv6 client: per /56 network, auth/address.ts); 0: no limit. */
  httpConnectionsPerAddress: number;
}

/** node:http's options for these limits: a request too slow is answered 408 and its connection closed. */
export function serverOptions(limits: HttpLimits): ServerOptions {
  return {
    headersTimeout: limits.httpHeadersTimeoutMs,
    requestTimeout: limits.httpRequestTimeoutMs,
    // How often node:http looks for requests past those timeouts (30 s by default, so a slow
    // client kept its connection up to 30 s longer than the timeout said).
    connectionsCheckingInterval: Math.min(1000, limits.httpHeadersTimeoutMs),
  };
}

/**
 * Refuses a connection over its address's limit at once: a 429 written before any request is
 * read, and the connection closed. Its requests never reach the server.
 */
export function limitConnectionsPerAddress(server: Server, limit: number): void {
  if (limit <= 0) return;
  const open = new Map<string, number>();
  const error = catalogue.rateLimited(
    `Too many open connections from this address: at most ${limit}`,
    null,
    'Close idle connections or reuse them (HTTP keep-alive) before opening more',
    { 'Retry-After': '1' },
  );
  const body = JSON.stringify(error.body());
  const refusal =
    `HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n${body}`;
  // Before node:http's own listener: a refused connection never gets a request parser.
  server.prependListener('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress);
    const n = open.get(key) ?? 0;
    if (n >= limit) {
      socket.end(refusal, () => socket.destroy());
      socket.pause(); // nothing it sends is read
      return;
    }
    open.set(key, n + 1);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left > 0) open.set(key, left);
      else open.delete(key);
    });
  });
}
