import type { Pool } from './pool.js';

// What the engine needs to know about its deployment, and nothing about any app: the roles it
// switches to, the function it runs before every request, and the bounds of a request's cost.
// The service's configuration (gateway/config.ts) is a superset of it.

export interface EngineConfig {
  /** Exposed schemas; the first is the default. */
  schemas: string[];
  /**
   * Schemas searched after the request's own (PostgREST's db-extra-search-path): where the
   * functions and types of extensions live (PostGIS's ST_AsGeoJSON for GeoJSON, for example).
   */
  extraSearchPath: string[];
  /** The role of a request without a JWT: a 42501 under it is a 401, not a 403. */
  anonRole: string;
  /** The roles a JWT's `role` claim may name. */
  apiRoles: string[];
  /** Roles that may only read: a write refused to them is answered as a read-only refusal. */
  readOnlyRoles: string[];
  /** Qualified name of the function run in every request transaction, or undefined. */
  preRequest: string | undefined;
  statementTimeoutMs: number;
  /**
   * The JWT claim that names a caller's tenant: every request of one tenant counts against one
   * share of the pool (pool.ts), whatever token or user made it.
   */
  tenantClaim: string;
  /** work_mem of a request's transaction (a Postgres size). */
  workMem: string;
  maxBodyBytes: number;
  maxEmbedDepth: number;
  maxSelectWidth: number;
  /** Bytes of one read's body, counted while Postgres builds it (query/read.ts, ReadBounds). */
  maxResponseBytes: number;
  aggregatesEnabled: boolean;
  planEnabled: boolean;
  /**
   * The column that says which tenant a row belongs to, compared with the caller's tenantClaim
   * in every statement on a relation that has it (for a caller that has the claim): a sharded
   * database (Citus) then sends the statement to that tenant's shard alone instead of to every
   * shard. Row-level security stays what decides which rows a caller sees. Undefined: none.
   */
  tenantColumn: string | undefined;
  /**
   * Where a tenant's idempotency keys are kept (plan/action.ts, `Idempotency-Key`): the functions
   * that claim a key in a write's transaction and store its response there. Undefined: the
   * header is not read.
   */
  idempotency?: IdempotencyStore;
  /**
   * Where a deployment logs the changes a request makes (ChangeLog); undefined: it does not,
   * and a write's transaction is as PostgREST's.
   */
  changes?: ChangeLog;
  /**
   * Claims a deployment adds to those of every transaction that may write (a caller's token
   * cannot set them: whatever it said under their names is replaced): values its database
   * functions read there, as Tally's budgets of a workspace's log and keys. Set with the claims,
   * so every node of a distributed database sees them.
   */
  writeClaims?: Record<string, string | number>;
}

/**
 * A log of changes kept by the database (its triggers), which a write names from its own
 * transaction. Each transaction that may write gets a fresh random id in its claims under
 * `requestClaim` (set with the claims, by SET LOCAL, so every node of a distributed database
 * sees it, and one the caller's token cannot choose), which the log's triggers record; and
 * `report` (a qualified function name, called without arguments as the caller) runs after the
 * request's statements, before its response settings are read, so it may name the changes in
 * `response.headers`.
 */
interface ChangeLog {
  requestClaim: string;
  report: string;
}

/**
 * Two functions of the database, by qualified name, both run as the caller in the write's own
 * transaction and both scoped to the caller's tenant by its claims:
 * `claim(key text, fingerprint text)` answers one row (claimed boolean, stored_fingerprint text,
 * stored_status integer, stored_headers jsonb, stored_body text): claimed, or what the first
 * request with the key stored, after waiting for a transaction that holds the key;
 * `save(key text, status integer, headers jsonb, body text)` stores the response.
 */
export interface IdempotencyStore {
  claim: string;
  save: string;
  /**
   * The largest answer (its headers and body, in bytes) a key keeps: a keyed write whose answer
   * is larger is refused and rolled back (TLY022). Undefined: any answer the write may give.
   */
  maxAnswerBytes?: number;
}

/** What a gateway call runs against: its configuration and the pool of the server's login. */
export interface EngineContext {
  config: EngineConfig;
  db: Pool;
}
