import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { ipKeyGenerator } from 'express-rate-limit';
import proxyAddr from 'proxy-addr';

/**
 * The client's address: the socket's peer, or behind one trusted reverse proxy
 * (TALLY_TRUST_PROXY=true) the last address that proxy appended to X-Forwarded-For. The proxy
 * appends an IP address; an entry that is not one was written by the client, and counts for
 * nothing (the socket's peer stands in): it would otherwise reach rate-limit keys of any length.
 * Express's req.ip is this too (server.ts), so every surface sees one address.
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string | undefined {
  const peer = req.socket.remoteAddress;
  if (!trustProxy) return peer;
  const forwarded = proxyAddr(req, (_addr, hop) => hop < 1);
  return isIP(forwarded) !== 0 ? forwarded : peer;
}

/**
 * The key a client address counts under in every limit of an address (its open connections,
 * its requests, its failed authentications, its settings sign-ins): an IPv4 address itself
 * (also written as an IPv4-mapped IPv6 address), an IPv6 address its /56 network. One client is
 * given a /56 or a /64 and may send from any address in it, so a limit per address would be a
 * limit per guess.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  let key = keys.get(address);
  if (key === undefined) {
    if (keys.size >= KNOWN_ADDRESSES) keys.clear();
    keys.set(address, (key = ipKeyGenerator(address)));
  }
  return key;
}

/**
 * The keys of the addresses seen last: every request asks for its address's key two or three
 * times (its pool share, its request limit, its answer's bytes), and ipKeyGenerator tests the
 * address against an IPv6 pattern of some 1,300 characters each time. The key depends on the
 * address alone; the map is emptied when it holds KNOWN_ADDRESSES.
 */
const keys = new Map<string, string>();
const KNOWN_ADDRESSES = 10_000;
