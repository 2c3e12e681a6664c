// The engine's process logger, re-exported for the server's own modules. The request log line
// and Server-Timing are the request shell's (http.ts serve), once for every surface.

export { errorFields, log, logToStderr, setLogLevel } from './engine/log.js';
