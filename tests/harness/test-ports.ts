import { Server } from 'node:net';
import { nextPortIn, testPortRange, type PortRange } from '../../gateway/db/free-port.js';

// With TALLY_TEST_PORTS set (CONTRIBUTING.md), every server a test file starts in its own
// process on "any port" (port 0: supertest's one for each request, a test's own listener)
// listens on an odd port of the range instead; freePort() hands out the even ones, for servers
// other processes start (Postgres, `tally` commands), so neither takes a port the other gave.
// node:net is the worker process's, shared by the files it runs: listening is patched once.

type Listen = (this: Server, ...args: unknown[]) => Server;
type Emit = (this: Server, event: string | symbol, ...rest: unknown[]) => boolean;

const PATCHED = Symbol.for('tally.test-ports');
const range = testPortRange();
if (range && !(Server.prototype as { [PATCHED]?: true })[PATCHED]) keepListenersIn(range);

/** Makes listen(0, …) listen on an odd port of `range`; returns what undoes it. */
export function keepListenersIn(range: PortRange): () => void {
  const prototype = Server.prototype as Server & { [PATCHED]?: true };
  const listen = prototype.listen as Listen;
  prototype[PATCHED] = true;
  prototype.listen = function (this: Server, ...args: unknown[]) {
    if (!asksAnyPort(args)) return listen.apply(this, args);
    return listenInRange(this, args, listen, range, nextPortIn(range, 1));
  } as Server['listen'];
  return () => {
    prototype.listen = listen as Server['listen'];
    delete prototype[PATCHED];
  };
}

/** listen(0, …) or listen({ port: 0, … }, …): a TCP port, whichever. */
function asksAnyPort(args: unknown[]): boolean {
  const [first] = args;
  if (first === 0 || first === '0') return true;
  return typeof first === 'object' && first !== null && 'port' in first && Number(first.port) === 0;
}

/**
 * Listens on `port`; while the port is taken, on the next odd one (once round the range) before
 * the caller sees the error. The caller's callback was registered by the first attempt (as a
 * 'listening' listener), so a retry passes none.
 */
function listenInRange(
  server: Server,
  args: unknown[],
  listen: Listen,
  range: PortRange,
  port: number,
  tries = 0,
): Server {
  const own = Object.prototype.hasOwnProperty.call(server, 'emit');
  const emit = server.emit as Emit;
  const restore = () => {
    if (own) server.emit = emit;
    else delete (server as { emit?: unknown }).emit;
  };
  (server as { emit: Emit }).emit = function (event, ...rest) {
    if (event === 'error' && isTaken(rest[0]) && tries < (range.last - range.first) / 2) {
      restore();
      const again = args.filter((a) => typeof a !== 'function');
      listenInRange(server, again, listen, range, nextPortIn(range, 1, port), tries + 1);
      return true;
    }
    if (event === 'listening' || event === 'error') restore();
    return emit.call(this, event, ...rest);
  };
  const [first, ...rest] = args;
  return listen.apply(server, [typeof first === 'object' ? { ...first, port } : port, ...rest]);
}

function isTaken(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'EADDRINUSE' || code === 'EACCES';
}
