// Errors, in one place: how an error is made, and how it is written.
//
// - Every error a client can get is an ApiError in the one shape, {code, message, details, hint}
//   with an HTTP status (and headers where it needs them), made only by an entry of a
//   catalogue: the engine's (PostgREST's errors, engine/errors/catalogue.ts, which knows no app)
//   and the app's below (its surfaces' own). `catalogue` here is both; surfaces import from
//   this file only.
// - Anything else thrown becomes an ApiError by the engine's toApiError
//   (engine/errors/translate.ts): a database error as PostgREST maps it, in the app's wording
//   given to the engine as configuration (READ_ONLY_HINT and the others below, through
//   deployment.ts), a lost database a 503, anything unexpected a logged 500.
// - writeError below writes it, on every surface: the request shell (http.ts) calls it for
//   anything a surface throws, Express's error handler (server.ts) for what a router passes on.
//   MCP answers a tool's error as a tool result instead (mcp/server.ts), from the same ApiError.

import type { ServerResponse } from 'node:http';
import { catalogue as engineCatalogue, entry } from './engine/errors/catalogue.js';
import { loginRefused, toApiError } from './engine/errors/translate.js';
import { errorFields, log } from './log.js';

export { ApiError } from './engine/errors/catalogue.js';
export { loginRefused, toApiError };

// Codes: PT### as PostgREST's convention (the status it names), TLY0xx the server, TLY1xx the
// /api/v1 wrapper, TLY2xx the settings pages.
export const appCatalogue = {
  // ---- the server ----
  unsupportedBodyCoding: entry(
    'TLY002',
    415,
    'a request body in a Content-Encoding or charset the server does not decode',
    () => ({
      message: 'The request body is in a Content-Encoding or charset the server does not decode',
      hint: 'Send the body as UTF-8, compressed with gzip, deflate or br or not at all',
      // RFC 9110 §15.5.16: a 415 for a content coding names the codings that are accepted.
      headers: { 'Accept-Encoding': 'gzip, deflate, br, identity' },
    }),
  ),

  // ---- workspaces and their tokens ----
  apiSwitchedOff: entry(
    'PT403',
    403,
    "the workspace's API switch is off (raised by the database's request check, too)",
    () => ({
      message: 'API access is switched off for this workspace',
      hint: 'A workspace owner can switch it on in the workspace settings',
    }),
  ),

  // ---- the /api/v1 wrapper (TLY1xx) ----
  notOneOf: entry(
    'PGRST100',
    400,
    'a query parameter of /api/v1 takes one of a fixed list of values',
    (name: string, allowed: string[]) => ({
      message: `${name} must be one of: ${allowed.join(', ')}`,
    }),
  ),
  recordNotFound: entry(
    'TLY100',
    404,
    'an /api/v1 path names a record id that is not in the workspace',
    (noun: string, id: string, listPath: string) => ({
      message: `No ${noun} with id ${id} in this workspace`,
      hint: `GET ${listPath} lists the ids`,
    }),
  ),
  recordChanged: entry(
    'TLY101',
    412,
    'an /api/v1 PATCH or DELETE carries an If-Match that is not the ETag of the record as it is now',
    (noun: string, id: string, path: string) => ({
      message: `The ${noun} ${id} changed since it was read`,
      details: 'If-Match does not name its current ETag; nothing was written',
      hint: `GET ${path} for the record as it is now and its ETag, then decide again`,
    }),
  ),

  // ---- the settings pages (TLY2xx, rendered as pages) ----
  signedOut: entry('TLY200', 401, 'a settings form arrives without a live session', () => ({
    message: 'Signed out',
    details: 'Your session has ended. Sign in again and repeat the change.',
  })),
  formRefused: entry('TLY201', 403, 'a settings form did not come from the current session (CSRF check)', () => ({
    message: 'Form refused',
    details: 'This form did not come from your current session. Reload the page and try again.',
  })),
  notAllowed: entry(
    'TLY202',
    403,
    "the member's role, or a one-time password not yet replaced, does not allow the change",
    (details: string, title: string = 'Not allowed') => ({
      message: title,
      details,
    }),
  ),
  pageNotFound: entry(
    'TLY203',
    404,
    'a settings page names a workspace or token the member cannot see',
    (title: string, details: string) => ({
      message: title,
      details,
    }),
  ),
  badForm: entry('TLY204', 400, 'a settings form is incomplete or has an invalid value', (details: string) => ({
    message: 'Bad request',
    details,
  })),
  tooManyTokens: entry(
    'TLY205',
    409,
    'a new workspace token, when the workspace has its maximum of active tokens (nothing is written)',
    (max: number) => ({
      message: `The workspace has ${max} active tokens, the most it may have`,
      details: `A workspace has at most ${max} active tokens. Revoke a token to make room for a new one.`,
      hint: 'Revoke a token to make room for a new one',
    }),
  ),
} as const;

/** Every error a surface may answer: the engine's and Tally's own. */
export const catalogue = { ...engineCatalogue, ...appCatalogue } as const;

/** Tally's wording of the engine's database errors (GatewayOptions, gateway/deployment.ts). */
export const READ_ONLY_HINT = 'Writes need a workspace token with the write scope (tally token create --scope write)';
export const ROW_SECURITY_HINT =
  'Rows belong to the workspace of your token: leave workspace_id out of the body, and only reference rows of your workspace';

/**
 * Answers anything thrown in the one error shape, on every surface: an ApiError as it is (a
 * body's refusals are made as ApiErrors where it is read, body.ts), a lost database a 503,
 * anything unexpected a logged 500. A response already under way cannot change its status: it
 * is left as it is.
 */
export function writeError(res: ServerResponse, err: unknown): void {
  const { error, unexpected } = toApiError(err);
  if (unexpected) log.error(errorFields(err), 'unexpected error');
  if (res.headersSent) return;
  const body = JSON.stringify(error.body());
  res.statusCode = error.status;
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
