import type { AuthContext } from '../call.js';
import { ApiError } from '../errors.js';

// Scopes (issue 5 §3): a read token's requests run as api_read, which has SELECT only, so
// Postgres itself refuses every write with 42501 (insufficient_privilege). Postgres's message
// ("permission denied for table …") does not say why; a surface that maps a 42501 of a write
// passes it through `scopeRefusal` so the client learns that the token is read-only, not that
// the table is off limits.

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export const isReadOnly = (auth: AuthContext): boolean => auth.role === 'api_read' || auth.claims.scope === 'read';

export function readOnlyError(): ApiError {
  return new ApiError(403, '42501', 'This token is read-only: it cannot create, change or delete data', null,
    'Writes need a workspace token with the write scope (tally token create --scope write)');
}

/**
 * The 403 for a write refused by the database's grants: "read-only" when the request's token
 * has the read scope, undefined otherwise (a table that is not granted at all keeps its own
 * permission-denied error). `sqlState` is the error's SQLSTATE; only 42501 is a refusal.
 */
export function scopeRefusal(method: string, auth: AuthContext, sqlState: string | undefined): ApiError | undefined {
  if (sqlState !== '42501' || !WRITE_METHODS.has(method.toUpperCase()) || !isReadOnly(auth)) return undefined;
  return readOnlyError();
}
