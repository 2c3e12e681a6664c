import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from './auth/address.js';
import { catalogue, writeError } from './errors.js';

// What one client may hold of the server's memory through the answers it is sent, and how many
// of its requests one connection may have the server work on at once. An answer waits in the
// server's memory until the client takes it: a client that read nothing held about 27 MB per
// large answer for as long as it liked (40 such connections took the process from 348 MB to
// 1.4 GB, and the 256 connections one address may hold would pass V8's heap limit and end the
// process for everyone). And HTTP/1.1 lets a client send requests one after the other on one
// connection without waiting for answers: 500 of them at once every half second each started
// their work at once, and another workspace's reads waited 25-30 s.

export interface SendLimits {
  /** Time an answer handed to its connection has to be taken by the client; 0: no limit. */
  httpSendTimeoutMs: number;
  /** Bytes of answers one client address may have waiting to be sent; 0: no limit. */
  httpSendBytesPerAddress: number;
  /** Requests one connection may have in flight at once (pipelined); one more closes it. */
  httpPipelineDepth: number;
}

/**
 * What the server holds for one answer until its response closes (Sending.release): its
 * connection's place in flight, its send deadline, the bytes it counts against its address.
 */
export interface Held {
  readonly socket: Socket;
  timer: NodeJS.Timeout | undefined;
  /** The address key its bytes count against (addressKey), once it reserved some. */
  key: string | undefined;
  bytes: number;
  /** Let go of (release): its response closed. */
  released: boolean;
}

/** Per server (createApp): the connections' requests in flight, and each address's bytes waiting to be sent. */
export class Sending {
  private readonly waiting = new Map<string, number>();
  private readonly inFlight = new WeakMap<Socket, number>();
  private readonly closing = new WeakSet<Socket>();

  constructor(private readonly limits: SendLimits) {}

  /**
   * Takes a request in, or answers it 429 and closes its connection when the connection has
   * httpPipelineDepth requests in flight already (a request is in flight until its answer is
   * sent). Requests the client pipelined after that one are not served at all: the connection
   * ends after the 429, and the server stops reading from it. Returns what the answer holds,
   * for release() when its response closes, or undefined when the request is not to be served.
   */
  admit(req: IncomingMessage, res: ServerResponse): Held | undefined {
    const socket = req.socket;
    if (this.closing.has(socket)) {
      socket.pause();
      return undefined;
    }
    const n = this.inFlight.get(socket) ?? 0;
    if (n >= this.limits.httpPipelineDepth) {
      this.closing.add(socket);
      socket.pause();
      res.shouldKeepAlive = false;
      writeError(res, tooManyPipelined(this.limits.httpPipelineDepth));
      return undefined;
    }
    this.inFlight.set(socket, n + 1);
    const held: Held = { socket, timer: undefined, key: undefined, bytes: 0, released: false };
    this.deadline(res, held);
    return held;
  }

  /**
   * Counts a body of `bytes` against `address` until its answer is sent (or its connection
   * closed), or throws a 429 when the address has httpSendBytesPerAddress bytes waiting
   * already. One answer is always let through: a body larger than the bound is not refused to
   * a client that is waiting for nothing else.
   */
  reserve(held: Held, address: string | undefined, bytes: number): void {
    const limit = this.limits.httpSendBytesPerAddress;
    // An answer let go of already (its client went while it was being made) is sent to nobody:
    // counted now, its bytes would never be let go of, and the address would be refused for ever.
    if (limit <= 0 || held.released) return;
    const key = held.key ?? addressKey(address);
    const waiting = this.waiting.get(key) ?? 0;
    if (waiting > 0 && waiting + bytes > limit) throw tooMuchUnread(limit);
    this.waiting.set(key, waiting + bytes);
    held.key = key;
    held.bytes += bytes;
  }

  /**
   * Lets go of what an admitted answer held, when its response closes (sent, or its connection
   * gone), once: its place in flight, its deadline, its bytes. One listener of the request shell
   * calls it (http.ts serve): each listener put on every response was a cost of every request.
   */
  release(held: Held): void {
    if (held.released) return;
    held.released = true;
    this.inFlight.set(held.socket, (this.inFlight.get(held.socket) ?? 1) - 1);
    clearTimeout(held.timer);
    if (held.key === undefined) return;
    const left = (this.waiting.get(held.key) ?? held.bytes) - held.bytes;
    if (left > 0) this.waiting.set(held.key, left);
    else this.waiting.delete(held.key);
  }

  /**
   * From the moment an answer is handed to its connection (prefinish), the client has
   * httpSendTimeoutMs to take it; then the connection is closed, and with it go the buffers that
   * held the answer. An honest client reading a 16 MiB answer at 2 Mbit/s takes about a minute.
   * An answer the socket took whole at once (the kernel's buffers had room) needs no deadline.
   */
  private deadline(res: ServerResponse, held: Held): void {
    const ms = this.limits.httpSendTimeoutMs;
    if (ms <= 0) return;
    res.on('prefinish', () => {
      if (!res.socket?.writableLength) return;
      held.timer = setTimeout(() => res.destroy(), ms);
      held.timer.unref();
    });
  }
}

const tooManyPipelined = (depth: number) =>
  catalogue.rateLimited(
    `Too many requests in flight on one connection: at most ${depth} at a time`,
    null,
    'Wait for the answers to your requests before sending more on the connection, or open another',
    { 'Retry-After': '1' },
  );

const tooMuchUnread = (limit: number) =>
  catalogue.rateLimited(
    `Too many answers not yet taken by this client address: at most ${limit} bytes wait to be sent to one address`,
    null,
    'Read the answers of your earlier requests before sending more',
    { 'Retry-After': '5' },
  );
