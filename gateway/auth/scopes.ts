import { ApiError } from '../errors.js';

// Scopes: a read token's requests run as api_read, which has SELECT only, so
// Postgres itself refuses every write with 42501 (insufficient_privilege). Its message
// ("permission denied for table …") does not say why; the gateway's error mapping
// (errors.ts, fromPgError) answers this instead, for every surface alike.

export function readOnlyError(): ApiError {
  return new ApiError(403, '42501', 'This token is read-only: it cannot create, change or delete data', null,
    'Writes need a workspace token with the write scope (tally token create --scope write)');
}
