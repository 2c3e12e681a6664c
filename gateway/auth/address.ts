import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
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
