import { pino } from 'pino';

// The engine's logger: one JSON logger for the process, at the level the configuration gives
// (setLogLevel; info until then). Log lines name what
// happened and where, never a secret: no token, JWT, apikey, password, query string or request
// body is ever a field. The HTTP request log (gateway/log.ts) builds on it.

// Lines are buffered up to 4 KB and written at least every second, and on exit: one write(2)
// per request was ~8% of a read's CPU under load.
const FLUSH_MS = 1000;
let level = 'info';
const create = (fd: 1 | 2) => {
  const destination = pino.destination({ dest: fd, sync: false, minLength: 4096 });
  setInterval(() => destination.flush(), FLUSH_MS).unref();
  process.once('exit', () => {
    try {
      destination.flushSync();
    } catch {
      // nothing more can be done at exit
    }
  });
  return pino(
    {
      level,
      base: { service: 'tally' },
      timestamp: isoTime,
    },
    destination,
  );
};

/**
 * pino's isoTime (`,"time":"2026-11-28T11:06:37.123Z"`), the date and time to the second made
 * once a second: a Date and its toISOString() for each line cost 1.4-2 µs of every request,
 * whose log line this is.
 */
export function isoTime(now = Date.now()): string {
  const second = Math.floor(now / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = `,"time":"${new Date(second * 1000).toISOString().slice(0, 20)}`;
  }
  const ms = now - second * 1000;
  return `${isoPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}
let isoSecond = NaN;
let isoPrefix = '';

/** The process logger; a live binding, so logToStderr() reaches every module that imported it. */
export let log = create(1);

/** The least severe level that is written (pino's: fatal, error, warn, info, debug, trace, silent). */
export function setLogLevel(next: string): void {
  level = next;
  log.level = next;
}

/** For a process whose standard output carries a protocol (MCP on stdio). */
export function logToStderr(): void {
  log = create(2);
}

/**
 * What of an unexpected error goes to the log: its type, code, message and stack. Not the
 * whole object: a driver error can carry the statement's parameters.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { error: String(err) };
  const code = (err as { code?: unknown }).code;
  return {
    error: {
      type: err.name,
      code: typeof code === 'string' ? code : undefined,
      message: err.message,
      stack: err.stack,
    },
  };
}
