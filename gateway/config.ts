// Configuration from the environment (the README's configuration table lists it). Parsed once at start; a bad
// value stops the start with a one-line message instead of surfacing later as a 500.

import type { HttpLimits } from './connections.js';
import type { EngineConfig } from './engine/config.js';

/** The service's configuration: the engine's (EngineConfig) and what the server and the app add. */
export interface Config extends EngineConfig, HttpLimits {
  /** An external Postgres, the owner's login (migrations, CLI). Unset: embedded Postgres in `home`. */
  databaseUrl: string | undefined;
  /** The server's own login (authenticator); required with databaseUrl, derived in embedded mode. */
  dbUri: string | undefined;
  /** Where embedded mode keeps its data and generated secrets. */
  home: string;
  embeddedPort: number;
  port: number;
  host: string;
  /** HS256 secrets: the current one signs, both verify (rotation without cutting clients off). */
  jwtSecret: string | undefined;
  jwtPreviousSecret: string | undefined;
  publishableKeys: string[];
  rateLimitPerMinute: number;
  /**
   * Connections to Postgres, how long a request waits for one, how many one tenant may hold, and
   * how many only the server's own statements (token exchange, counters, settings, health) take.
   */
  poolSize: number;
  poolAcquireTimeoutMs: number;
  poolPerTenant: number;
  poolReserved: number;
  logLevel: string;
  /** Lifetime of a sign-in session of the settings pages. */
  settingsSessionHours: number;
  /** Failed settings sign-ins per (email, client address) / per client address in 15 minutes before growing delays. */
  signInFailuresPerAccount: number;
  signInFailuresPerAddress: number;
  /** How many days of the activity log (every change of a workspace's records) are kept. */
  activityRetentionDays: number;
  /** Browser origins besides Tally's own (loopback at its port) that may call /mcp. */
  mcpAllowedOrigins: string[];
  /** Statements are prepared on their connection (PostgREST's db-prepared-statements); off behind a transaction pooler. */
  preparedStatements: boolean;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function flag(env: Env, name: string, fallback = false): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '') return fallback;
  if (raw === 'false' || raw === '0' || raw === 'off') return false;
  if (raw === 'true' || raw === '1' || raw === 'on') return true;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

const identifier = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** An origin as browsers send it (scheme, host, port; no path), or a ConfigError naming it. */
function origin(raw: string): string {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.origin !== raw.replace(/\/$/, ''))
    throw new ConfigError(
      `TALLY_MCP_ALLOWED_ORIGINS must list origins such as https://app.example.com (no path), got "${raw}"`,
    );
  return url.origin;
}

/**
 * A postgres:// URL of the environment, its password percent-encoded where it holds characters
 * a URL reserves. docker compose (and a shell) put a password into a URL as it is, and a
 * base64 one (`openssl rand -base64`: / + =) then made the URL invalid or cut it at the `/`.
 * The password is what lies between the user's `:` and the last `@`; a `%` that starts an
 * escape is kept, so an encoded password stays as it is.
 */
function postgresUrl(env: Env, name: string): string | undefined {
  const raw = env[name] || undefined;
  if (raw === undefined) return undefined;
  if (!/^postgres(ql)?:\/\//.test(raw)) throw new ConfigError(`${name} must be a postgres:// or postgresql:// URL`);
  const m = /^(postgres(?:ql)?:\/\/[^:@/?#]*:)(.*)(@[^@]*)$/s.exec(raw);
  if (!m) return raw;
  const [, head = '', password = '', tail = ''] = m;
  const encoded = password.replace(/%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=%]/g, (c) => encodeURIComponent(c));
  const url = head + encoded + tail;
  try {
    // A URL holds one host; libpq's list of several (h1:5432,h2:5432) is checked by its first.
    new URL(head + encoded + tail.replace(/^@([^/?#,]*)[^/?#]*/, '@$1'));
  } catch {
    throw new ConfigError(`${name} is not a valid URL (host, port or database)`);
  }
  return url;
}

/**
 * Requests per minute and token by default: 60 where Tally runs against a database of its own
 * (DATABASE_URL, a deployment); ten times that on a laptop's embedded database, where one
 * person follows the README (about a hundred requests in a few minutes, the MCP Inspector's
 * several per step) and should not be told to wait. `tally up` says which applies.
 */
export const DEPLOYED_RATE_LIMIT = 60;
const LOCAL_RATE_LIMIT = 600;

/** The default pre-request function: it refuses a revoked token and a switched-off API in every request's transaction. */
export const TOKEN_CHECK = 'tally.check_request';

export function loadConfig(env: Env = process.env): Config {
  const schemas = list(env.TALLY_DB_SCHEMAS ?? 'public');
  if (schemas.length === 0) throw new ConfigError('TALLY_DB_SCHEMAS must name at least one schema');
  for (const s of schemas)
    if (!identifier.test(s)) throw new ConfigError(`TALLY_DB_SCHEMAS: "${s}" is not a schema name`);
  const anonRole = (env.TALLY_DB_ANON_ROLE ?? 'anon').trim();
  if (!identifier.test(anonRole)) throw new ConfigError(`TALLY_DB_ANON_ROLE: "${anonRole}" is not a role name`);
  const apiRoles = list(env.TALLY_DB_API_ROLES ?? 'anon,api_read,api_write');
  for (const r of apiRoles)
    if (!identifier.test(r)) throw new ConfigError(`TALLY_DB_API_ROLES: "${r}" is not a role name`);
  if (!apiRoles.includes(anonRole)) apiRoles.push(anonRole);
  // Unset: api_read, where it is an API role (a database of its own may have other roles).
  const readOnlyRoles =
    env.TALLY_DB_READ_ONLY_ROLES === undefined
      ? apiRoles.filter((r) => r === 'api_read')
      : list(env.TALLY_DB_READ_ONLY_ROLES);
  for (const r of readOnlyRoles)
    if (!apiRoles.includes(r))
      throw new ConfigError(`TALLY_DB_READ_ONLY_ROLES: "${r}" is not one of TALLY_DB_API_ROLES`);
  const preRequestRaw = (env.TALLY_DB_PRE_REQUEST ?? TOKEN_CHECK).trim();
  if (preRequestRaw !== '' && !preRequestRaw.split('.').every((p) => identifier.test(p))) {
    throw new ConfigError(`TALLY_DB_PRE_REQUEST: "${preRequestRaw}" is not a function name`);
  }
  const jwtSecret = env.TALLY_JWT_SECRET || undefined;
  const jwtPreviousSecret = env.TALLY_JWT_SECRET_PREVIOUS || undefined;
  for (const [name, value] of [
    ['TALLY_JWT_SECRET', jwtSecret],
    ['TALLY_JWT_SECRET_PREVIOUS', jwtPreviousSecret],
  ] as const) {
    if (value !== undefined && value.length < 32) throw new ConfigError(`${name} must be at least 32 characters long`);
  }
  const databaseUrl = postgresUrl(env, 'DATABASE_URL');
  const dbUri = postgresUrl(env, 'TALLY_DB_URI');
  const workMem = (env.TALLY_DB_WORK_MEM ?? '4MB').trim();
  if (!/^\d{1,7}(kB|MB|GB)$/.test(workMem))
    throw new ConfigError(`TALLY_DB_WORK_MEM must be a size such as 4MB or 512kB, got "${workMem}"`);
  const poolSize = integer(env, 'TALLY_DB_POOL', 10, 1, 1000);
  if (env.TALLY_DB_POOL_PER_TOKEN !== undefined)
    throw new ConfigError(
      'TALLY_DB_POOL_PER_TOKEN is now TALLY_DB_POOL_PER_TENANT (connections one workspace may hold)',
    );
  // A fifth of the pool for the server's own statements, and half of the rest per tenant.
  const poolReserved = integer(
    env,
    'TALLY_DB_POOL_RESERVED',
    poolSize > 1 ? Math.max(1, Math.floor(poolSize / 5)) : 0,
    0,
    poolSize - 1,
  );
  const httpHeadersTimeoutMs = integer(env, 'TALLY_HTTP_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000);
  const httpRequestTimeoutMs = integer(env, 'TALLY_HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  if (httpRequestTimeoutMs < httpHeadersTimeoutMs)
    throw new ConfigError('TALLY_HTTP_REQUEST_TIMEOUT_MS must be at least TALLY_HTTP_HEADERS_TIMEOUT_MS');
  const tenantClaim = (env.TALLY_DB_TENANT_CLAIM ?? 'workspace_id').trim();
  if (tenantClaim === '') throw new ConfigError('TALLY_DB_TENANT_CLAIM must name a JWT claim');
  // The column a tenant table's rows name their tenant in (compared with TALLY_DB_TENANT_CLAIM).
  const tenantColumn = (env.TALLY_DB_TENANT_COLUMN ?? 'workspace_id').trim();
  if (tenantColumn !== '' && !identifier.test(tenantColumn))
    throw new ConfigError(`TALLY_DB_TENANT_COLUMN must be a column name (or empty for none), got "${tenantColumn}"`);
  return {
    databaseUrl,
    dbUri,
    home: env.TALLY_HOME || '.tally',
    embeddedPort: integer(env, 'TALLY_EMBEDDED_PG_PORT', 54329, 1, 65535),
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    schemas,
    anonRole,
    apiRoles,
    readOnlyRoles,
    preRequest: preRequestRaw === '' ? undefined : preRequestRaw,
    jwtSecret,
    jwtPreviousSecret,
    publishableKeys: list(env.TALLY_PUBLISHABLE_KEYS),
    rateLimitPerMinute: integer(
      env,
      'TALLY_RATE_LIMIT_PER_MINUTE',
      databaseUrl ? DEPLOYED_RATE_LIMIT : LOCAL_RATE_LIMIT,
      1,
      10_000_000,
    ),
    maxBodyBytes: integer(env, 'TALLY_MAX_BODY_BYTES', 1024 * 1024, 1024, 1024 * 1024 * 1024),
    statementTimeoutMs: integer(env, 'TALLY_DB_STATEMENT_TIMEOUT_MS', 10_000, 0, 3_600_000),
    poolSize,
    poolAcquireTimeoutMs: integer(env, 'TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS', 3000, 100, 600_000),
    poolReserved,
    poolPerTenant: integer(
      env,
      'TALLY_DB_POOL_PER_TENANT',
      Math.max(1, Math.floor((poolSize - poolReserved) / 2)),
      1,
      poolSize - poolReserved,
    ),
    tenantClaim,
    httpHeadersTimeoutMs,
    httpRequestTimeoutMs,
    // Behind a reverse proxy every connection comes from the proxy: no limit by default there.
    httpConnectionsPerAddress: integer(
      env,
      'TALLY_HTTP_CONNECTIONS_PER_ADDRESS',
      env.TALLY_TRUST_PROXY === '1' ? 0 : 256,
      0,
      1_000_000,
    ),
    maxEmbedDepth: integer(env, 'TALLY_DB_MAX_EMBED_DEPTH', 3, 0, 100),
    maxSelectWidth: integer(env, 'TALLY_DB_MAX_SELECT_WIDTH', 200, 1, 1600),
    maxResponseBytes: integer(env, 'TALLY_DB_MAX_RESPONSE_BYTES', 16 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    workMem,
    logLevel: env.LOG_LEVEL || 'info',
    settingsSessionHours: integer(env, 'TALLY_SETTINGS_SESSION_HOURS', 12, 1, 24 * 30),
    signInFailuresPerAccount: integer(env, 'TALLY_SIGN_IN_FAILURES_PER_ACCOUNT', 5, 1, 1000),
    signInFailuresPerAddress: integer(env, 'TALLY_SIGN_IN_FAILURES_PER_ADDRESS', 20, 1, 100_000),
    aggregatesEnabled: flag(env, 'TALLY_DB_AGGREGATES_ENABLED'),
    planEnabled: flag(env, 'TALLY_DB_PLAN_ENABLED'),
    tenantColumn: tenantColumn === '' ? undefined : tenantColumn,
    preparedStatements: flag(env, 'TALLY_DB_PREPARED_STATEMENTS', true),
    mcpAllowedOrigins: list(env.TALLY_MCP_ALLOWED_ORIGINS).map(origin),
    activityRetentionDays: integer(env, 'TALLY_ACTIVITY_RETENTION_DAYS', 365, 1, 36_500),
  };
}
