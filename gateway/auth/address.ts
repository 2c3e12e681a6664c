import type { IncomingMessage } from 'node:http';
import proxyAddr from 'proxy-addr';

/**
 * The client's address, as Express's req.ip gives it: the socket's peer, or behind one trusted
 * reverse proxy (TALLY_TRUST_PROXY=1) the last address that proxy appended to X-Forwarded-For.
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string | undefined {
  return proxyAddr(req, trustProxy ? (_addr, hop) => hop < 1 : () => false);
}
