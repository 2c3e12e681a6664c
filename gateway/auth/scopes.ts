import { catalogue, READ_ONLY_HINT, type ApiError } from '../errors.js';

// Scopes: a read token's requests run as api_read, which has SELECT only, so
// Postgres itself refuses every write with 42501 (insufficient_privilege). Its message
// ("permission denied for table …") does not say why; the gateway's error mapping
// (engine/errors/translate.ts) answers this instead, for every surface alike.

export const readOnlyError = (): ApiError => catalogue.readOnly(null, READ_ONLY_HINT);
