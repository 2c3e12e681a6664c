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
export const addressKey = (address: string | undefined): string =>
  address === undefined ? 'unknown' : ipKeyGenerator(address);
