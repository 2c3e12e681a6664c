// The statements of an idempotent write (plan/action.ts): the claim of its key, run first in
// the write's transaction, and the save of its response, run last before COMMIT. The functions
// are the deployment's (EngineConfig.idempotency); the engine only calls them.

import type { IdempotencyStore } from '../config.js';
import { compile, ident, join, param, sql, type Fragment } from '../sql.js';
import type { Statement } from './read.js';

/** A configured, possibly schema-qualified function name. */
const functionName = (name: string): Fragment => join(name.split('.').map(ident), sql`.`);

/** Claims `key` for a request whose digest is `fingerprint`: one row (see IdempotencyStore). */
export const claimStatement = (store: IdempotencyStore, key: string, fingerprint: string): Statement =>
  compile(
    sql`SELECT claimed, stored_fingerprint, stored_status, stored_headers::text AS stored_headers, stored_body FROM ${functionName(store.claim)}(${param(key)}::text, ${param(fingerprint)}::text)`,
  );

/** Stores what the request that claimed `key` answers. */
export const saveStatement = (
  store: IdempotencyStore,
  key: string,
  response: { status: number; headers: Record<string, string>; body: string | undefined },
): Statement =>
  compile(
    sql`SELECT ${functionName(store.save)}(${param(key)}::text, ${param(String(response.status))}::integer, ${param(JSON.stringify(response.headers))}::jsonb, ${param(response.body ?? null)}::text)`,
  );
