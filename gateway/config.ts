// Configuration from the environment (the table of docs/configuration.md lists it, and a test
// holds the two together). Every variable is parsed here, once, with zod, and nowhere else reads
// the environment for a setting; a bad value stops the start with one line naming the variable
// and what it accepts, instead of surfacing later as a 500 or being silently taken as a default.

import { z } from 'zod';
import type { HttpLimits } from './connections.js';
import type { EngineConfig } from './engine/config.js';
import { MAX_NESTING } from './engine/request/parsec.js';

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
  logLevel: LogLevel;
  /** Lifetime of a sign-in session of the settings pages. */
  settingsSessionHours: number;
  /** Failed settings sign-ins per (email, client address) / per client address in 15 minutes before growing delays. */
  signInFailuresPerAccount: number;
  signInFailuresPerAddress: number;
  /** How many days of the activity log (every change of a workspace's records) are kept. */
  activityRetentionDays: number;
  /** Bytes a workspace's activity log may hold (its entries as text); undos may take it to twice that. */
  activityBudgetBytes: number;
  /** Bytes the idempotency keys of a workspace may hold in stored answers (those of the last 24 hours). */
  idempotencyBudgetBytes: number;
  /** Browser origins besides Tally's own (loopback at its port) that may call /mcp. */
  mcpAllowedOrigins: string[];
  /** Statements are prepared on their connection (PostgREST's db-prepared-statements); off behind a transaction pooler. */
  preparedStatements: boolean;
  /** Behind one reverse proxy: client addresses come from X-Forwarded-For, session cookies are Secure. */
  trustProxy: boolean;
  /** The workspace token `tally mcp` (MCP on stdio) serves. */
  workspaceToken: string | undefined;
  /** The variables the environment gave a value (the others took their defaults). */
  given: ReadonlySet<Setting>;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const identifier = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** A variable's text, trimmed; unset and empty are the same: the default. */
const raw = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** A whole number within bounds; undefined when unset (the default is applied below). */
const integer = (min: number, max: number) =>
  raw.pipe(
    z
      .string()
      .regex(/^\d+$/, `must be a whole number from ${min} to ${max}`)
      .transform(Number)
      .pipe(z.number().min(min, `must be from ${min} to ${max}`).max(max, `must be from ${min} to ${max}`))
      .optional(),
  );

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];
/** A switch: true/false, 1/0, yes/no or on/off, in any case; anything else is refused, never taken as off. */
const boolean = (fallback: boolean) =>
  raw.transform((v, ctx) => {
    if (v === undefined) return fallback;
    const word = v.toLowerCase();
    if (TRUE.includes(word)) return true;
    if (FALSE.includes(word)) return false;
    ctx.addIssue({ code: 'custom', message: `must be one of ${[...TRUE, ...FALSE].join(', ')}` });
    return z.NEVER;
  });

/** A comma-separated list (blanks dropped); undefined when the variable is unset. */
const list = (itemOk: RegExp, what: string) =>
  z
    .string()
    .optional()
    .transform((v) =>
      v === undefined
        ? undefined
        : v
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s.length > 0),
    )
    .refine((items) => items === undefined || items.every((s) => itemOk.test(s)), `must be ${what}, comma separated`);

const name = (what: string) => raw.refine((v) => v === undefined || identifier.test(v), `must be ${what}`);

/** A secret as it was given (blanks are part of it); unset or empty: none. */
const verbatim = z
  .string()
  .optional()
  .transform((v) => v || undefined);
const secret = verbatim.refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters long');

/**
 * A postgres:// URL of the environment, its password percent-encoded where it holds characters
 * a URL reserves. docker compose (and a shell) put a password into a URL as it is, and a
 * base64 one (`openssl rand -base64`: / + =) then made the URL invalid or cut it at the `/`.
 * The password is what lies between the user's `:` and the last `@`; a `%` that starts an
 * escape is kept, so an encoded password stays as it is.
 */
const postgresUrl = raw.transform((value, ctx) => {
  if (value === undefined) return undefined;
  if (!/^postgres(ql)?:\/\//.test(value)) {
    ctx.addIssue({ code: 'custom', message: 'must be a postgres:// or postgresql:// URL' });
    return z.NEVER;
  }
  const m = /^(postgres(?:ql)?:\/\/[^:@/?#]*:)(.*)(@[^@]*)$/s.exec(value);
  if (!m) return value;
  const [, head = '', password = '', tail = ''] = m;
  const encoded = password.replace(/%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=%]/g, (c) => encodeURIComponent(c));
  try {
    // A URL holds one host; libpq's list of several (h1:5432,h2:5432) is checked by its first.
    new URL(head + encoded + tail.replace(/^@([^/?#,]*)[^/?#]*/, '@$1'));
  } catch {
    ctx.addIssue({ code: 'custom', message: 'is not a valid URL (host, port or database)' });
    return z.NEVER;
  }
  return head + encoded + tail;
});

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Every variable Tally reads, and how. The table of docs/configuration.md has a row for each
 * (tests/unit/config.test.ts compares them). Defaults that depend on another variable are applied in
 * loadConfig.
 */
const ENVIRONMENT = z.object({
  DATABASE_URL: postgresUrl,
  TALLY_DB_URI: postgresUrl,
  TALLY_DB_API_ROLES: list(identifier, 'role names'),
  TALLY_DB_READ_ONLY_ROLES: list(identifier, 'role names'),
  TALLY_HOME: raw,
  TALLY_EMBEDDED_PG_PORT: integer(1, 65535),
  PORT: integer(0, 65535),
  HOST: raw,
  // Any name but a comma (the separator): schemas reach SQL only quoted, as PostgREST's may be named.
  TALLY_DB_SCHEMAS: list(/^[^\0]+$/, 'schema names').refine(
    (s) => s === undefined || s.length > 0,
    'must name at least one schema',
  ),
  TALLY_DB_ANON_ROLE: name('a role name'),
  TALLY_DB_EXTRA_SEARCH_PATH: list(identifier, 'schema names'),
  TALLY_DB_PRE_REQUEST: z
    .string()
    .optional()
    .transform((v) => v?.trim())
    .refine((v) => !v || v.split('.').every((p) => identifier.test(p)), 'must be a function name (or empty for none)'),
  TALLY_JWT_SECRET: secret,
  TALLY_JWT_SECRET_PREVIOUS: secret,
  TALLY_PUBLISHABLE_KEYS: list(/./, 'keys'),
  TALLY_RATE_LIMIT_PER_MINUTE: integer(1, 10_000_000),
  TALLY_HTTP_CONNECTIONS_PER_ADDRESS: integer(0, 1_000_000),
  TALLY_HTTP_HEADERS_TIMEOUT_MS: integer(100, 600_000),
  TALLY_HTTP_REQUEST_TIMEOUT_MS: integer(100, 3_600_000),
  TALLY_HTTP_PIPELINE_DEPTH: integer(1, 1000),
  TALLY_HTTP_SEND_TIMEOUT_MS: integer(1000, 3_600_000),
  TALLY_HTTP_SEND_BYTES_PER_ADDRESS: integer(1024 * 1024, 1024 * 1024 * 1024 * 1024),
  TALLY_MAX_BODY_BYTES: integer(1024, 1024 * 1024 * 1024),
  TALLY_DB_STATEMENT_TIMEOUT_MS: integer(0, 3_600_000),
  TALLY_DB_POOL: integer(1, 1000),
  TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS: integer(100, 600_000),
  TALLY_DB_POOL_RESERVED: integer(0, 999),
  TALLY_DB_POOL_PER_TENANT: integer(1, 1000),
  TALLY_DB_TENANT_CLAIM: z
    .string()
    .optional()
    .refine((v) => v === undefined || v.trim() !== '', 'must name a JWT claim'),
  TALLY_DB_TENANT_COLUMN: z
    .string()
    .optional()
    .refine(
      (v) => v === undefined || v.trim() === '' || identifier.test(v.trim()),
      'must be a column name (or empty for none)',
    ),
  TALLY_DB_MAX_EMBED_DEPTH: integer(0, MAX_NESTING),
  TALLY_DB_MAX_SELECT_WIDTH: integer(1, 1600),
  TALLY_DB_MAX_RESPONSE_BYTES: integer(1024, 1024 * 1024 * 1024),
  TALLY_DB_WORK_MEM: raw.refine(
    (v) => v === undefined || /^\d{1,7}(kB|MB|GB)$/.test(v),
    'must be a size such as 4MB or 512kB',
  ),
  TALLY_DB_AGGREGATES_ENABLED: boolean(false),
  TALLY_DB_PLAN_ENABLED: boolean(false),
  TALLY_DB_PREPARED_STATEMENTS: boolean(true),
  TALLY_SETTINGS_SESSION_HOURS: integer(1, 24 * 30),
  TALLY_SIGN_IN_FAILURES_PER_ACCOUNT: integer(1, 1000),
  TALLY_SIGN_IN_FAILURES_PER_ADDRESS: integer(1, 100_000),
  TALLY_ACTIVITY_RETENTION_DAYS: integer(1, 36_500),
  TALLY_ACTIVITY_BUDGET_BYTES: integer(4096, 2 ** 40),
  TALLY_IDEMPOTENCY_BUDGET_BYTES: integer(1024, 2 ** 40),
  TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES: integer(1024, 1024 * 1024 * 1024),
  TALLY_MCP_ALLOWED_ORIGINS: list(/./, 'origins').transform((items, ctx) =>
    items?.map((raw) => {
      const url = URL.canParse(raw) ? new URL(raw) : undefined;
      if (!url || !/^https?:$/.test(url.protocol) || url.origin !== raw.replace(/\/$/, ''))
        ctx.addIssue({
          code: 'custom',
          message: `must list origins such as https://app.example.com (no path), "${raw}" is not one`,
        });
      return url?.origin ?? raw;
    }),
  ),
  TALLY_TRUST_PROXY: boolean(false),
  TALLY_TOKEN: verbatim,
  LOG_LEVEL: raw.pipe(z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).optional()),
  /** Renamed: its old name stops the start with the new one, rather than being ignored. */
  TALLY_DB_POOL_PER_TOKEN: z
    .undefined({ error: 'is now TALLY_DB_POOL_PER_TENANT (connections one workspace may hold)' })
    .optional(),
});

/** The variables of the configuration, as the table of docs/configuration.md lists them. */
export type Setting = keyof typeof ENVIRONMENT.shape;
export const SETTINGS = Object.keys(ENVIRONMENT.shape).filter((s) => s !== 'TALLY_DB_POOL_PER_TOKEN') as Setting[];

/** Variables whose value an error line must not repeat: secrets, and URLs that hold a password. */
const SECRET: ReadonlySet<string> = new Set([
  'DATABASE_URL',
  'TALLY_DB_URI',
  'TALLY_JWT_SECRET',
  'TALLY_JWT_SECRET_PREVIOUS',
  'TALLY_TOKEN',
]);

/** A problem of the environment as one line: the variable, what it accepts, and what it was. */
function problem(variable: string, message: string, env: Env): ConfigError {
  const value = env[variable];
  const got = value === undefined || value === '' || SECRET.has(variable) ? '' : `, got "${value}"`;
  return new ConfigError(`${variable} ${message}${got}`);
}

/**
 * Requests per minute and token by default: 60 where Tally runs against a database of its own
 * (DATABASE_URL, a deployment); ten times that on a laptop's embedded database, where one
 * person follows the docs (about a hundred requests in a few minutes, the MCP Inspector's
 * several per step) and should not be told to wait. `tally up` says which applies.
 */
export const DEPLOYED_RATE_LIMIT = 60;
const LOCAL_RATE_LIMIT = 600;

/** The default pre-request function: it refuses a revoked token and a switched-off API in every request's transaction. */
export const TOKEN_CHECK = 'tally.check_request';

export function loadConfig(env: Env = process.env): Config {
  const parsed = ENVIRONMENT.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw problem(String(issue.path[0]), issue.message, env);
  }
  const e = parsed.data;
  const given = new Set(SETTINGS.filter((s) => env[s] !== undefined && env[s].trim() !== ''));
  const fail = (variable: Setting, message: string): never => {
    throw problem(variable, message, env);
  };
  const { anonRole, apiRoles, readOnlyRoles } = rolesOf(e, fail);
  const preRequest = e.TALLY_DB_PRE_REQUEST ?? TOKEN_CHECK;
  const { poolSize, poolReserved, poolPerTenant } = poolOf(e, fail);
  const httpHeadersTimeoutMs = e.TALLY_HTTP_HEADERS_TIMEOUT_MS ?? 10_000;
  const httpRequestTimeoutMs = e.TALLY_HTTP_REQUEST_TIMEOUT_MS ?? 30_000;
  if (httpRequestTimeoutMs < httpHeadersTimeoutMs)
    fail('TALLY_HTTP_REQUEST_TIMEOUT_MS', 'must be at least TALLY_HTTP_HEADERS_TIMEOUT_MS');
  const tenantColumn = (e.TALLY_DB_TENANT_COLUMN ?? 'workspace_id').trim();

  return {
    databaseUrl: e.DATABASE_URL,
    dbUri: e.TALLY_DB_URI,
    home: e.TALLY_HOME ?? '.tally',
    embeddedPort: e.TALLY_EMBEDDED_PG_PORT ?? 54329,
    port: e.PORT ?? 3000,
    host: e.HOST ?? '127.0.0.1',
    schemas: e.TALLY_DB_SCHEMAS ?? ['public'],
    extraSearchPath: e.TALLY_DB_EXTRA_SEARCH_PATH ?? ['public'],
    anonRole,
    apiRoles,
    readOnlyRoles,
    preRequest: preRequest === '' ? undefined : preRequest,
    jwtSecret: e.TALLY_JWT_SECRET,
    jwtPreviousSecret: e.TALLY_JWT_SECRET_PREVIOUS,
    publishableKeys: e.TALLY_PUBLISHABLE_KEYS ?? [],
    rateLimitPerMinute: e.TALLY_RATE_LIMIT_PER_MINUTE ?? (e.DATABASE_URL ? DEPLOYED_RATE_LIMIT : LOCAL_RATE_LIMIT),
    maxBodyBytes: e.TALLY_MAX_BODY_BYTES ?? 1024 * 1024,
    statementTimeoutMs: e.TALLY_DB_STATEMENT_TIMEOUT_MS ?? 10_000,
    poolSize,
    poolAcquireTimeoutMs: e.TALLY_DB_POOL_ACQUISITION_TIMEOUT_MS ?? 3000,
    poolReserved,
    poolPerTenant,
    tenantClaim: (e.TALLY_DB_TENANT_CLAIM ?? 'workspace_id').trim(),
    httpHeadersTimeoutMs,
    httpRequestTimeoutMs,
    // Behind a reverse proxy every connection comes from the proxy: no limit by default there.
    httpConnectionsPerAddress: e.TALLY_HTTP_CONNECTIONS_PER_ADDRESS ?? (e.TALLY_TRUST_PROXY ? 0 : 256),
    httpPipelineDepth: e.TALLY_HTTP_PIPELINE_DEPTH ?? 8,
    httpSendTimeoutMs: e.TALLY_HTTP_SEND_TIMEOUT_MS ?? 60_000,
    httpSendBytesPerAddress: e.TALLY_HTTP_SEND_BYTES_PER_ADDRESS ?? 64 * 1024 * 1024,
    maxEmbedDepth: e.TALLY_DB_MAX_EMBED_DEPTH ?? 3,
    maxSelectWidth: e.TALLY_DB_MAX_SELECT_WIDTH ?? 200,
    maxResponseBytes: e.TALLY_DB_MAX_RESPONSE_BYTES ?? 16 * 1024 * 1024,
    workMem: e.TALLY_DB_WORK_MEM ?? '4MB',
    logLevel: e.LOG_LEVEL ?? 'info',
    settingsSessionHours: e.TALLY_SETTINGS_SESSION_HOURS ?? 12,
    signInFailuresPerAccount: e.TALLY_SIGN_IN_FAILURES_PER_ACCOUNT ?? 5,
    signInFailuresPerAddress: e.TALLY_SIGN_IN_FAILURES_PER_ADDRESS ?? 20,
    aggregatesEnabled: e.TALLY_DB_AGGREGATES_ENABLED,
    planEnabled: e.TALLY_DB_PLAN_ENABLED,
    tenantColumn: tenantColumn === '' ? undefined : tenantColumn,
    ...storesOf(e, fail),
    mcpAllowedOrigins: e.TALLY_MCP_ALLOWED_ORIGINS ?? [],
    preparedStatements: e.TALLY_DB_PREPARED_STATEMENTS,
    trustProxy: e.TALLY_TRUST_PROXY,
    workspaceToken: e.TALLY_TOKEN,
    given,
  };
}

type Environment = z.infer<typeof ENVIRONMENT>;
type Fail = (variable: Setting, message: string) => never;

/** The API roles (the anonymous one among them) and those of them that may only read. */
function rolesOf(e: Environment, fail: Fail): Pick<Config, 'anonRole' | 'apiRoles' | 'readOnlyRoles'> {
  const anonRole = e.TALLY_DB_ANON_ROLE ?? 'anon';
  const apiRoles = e.TALLY_DB_API_ROLES ?? ['anon', 'api_read', 'api_write'];
  if (!apiRoles.includes(anonRole)) apiRoles.push(anonRole);
  // Unset: api_read, where it is an API role (a database of its own may have other roles).
  const readOnlyRoles = e.TALLY_DB_READ_ONLY_ROLES ?? apiRoles.filter((r) => r === 'api_read');
  for (const r of readOnlyRoles)
    if (!apiRoles.includes(r))
      fail('TALLY_DB_READ_ONLY_ROLES', `must name roles of TALLY_DB_API_ROLES ("${r}" is not one)`);
  return { anonRole, apiRoles, readOnlyRoles };
}

/**
 * What Tally keeps per workspace, and within which budgets: its activity log (kept for
 * TALLY_ACTIVITY_RETENTION_DAYS, within 64 MiB) and its idempotency keys (32 MiB of answers,
 * each at most 1 MiB, which must fit the keys' budget); the database's functions that keep them
 * (sql/app/definitions/activity.sql, idempotency.sql) read the budgets in a writing request's claims.
 */
function storesOf(
  e: Environment,
  fail: Fail,
): Pick<
  Config,
  'idempotency' | 'changes' | 'writeClaims' | 'activityRetentionDays' | 'activityBudgetBytes' | 'idempotencyBudgetBytes'
> {
  const activityBudgetBytes = e.TALLY_ACTIVITY_BUDGET_BYTES ?? 64 * 1024 * 1024;
  const idempotencyBudgetBytes = e.TALLY_IDEMPOTENCY_BUDGET_BYTES ?? 32 * 1024 * 1024;
  const maxAnswerBytes = e.TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES ?? Math.min(1024 * 1024, idempotencyBudgetBytes);
  if (maxAnswerBytes > idempotencyBudgetBytes)
    fail('TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES', 'must be at most TALLY_IDEMPOTENCY_BUDGET_BYTES');
  return {
    idempotency: { claim: 'tally.idempotency_claim', save: 'tally.idempotency_save', maxAnswerBytes },
    // The activity log's request id and the report of a write's changes.
    changes: { requestClaim: 'request_id', report: 'tally.report_changes' },
    writeClaims: { activity_budget: activityBudgetBytes, idempotency_budget: idempotencyBudgetBytes },
    activityRetentionDays: e.TALLY_ACTIVITY_RETENTION_DAYS ?? 365,
    activityBudgetBytes,
    idempotencyBudgetBytes,
  };
}

/** The pool's size, the part kept for the server's own statements, and one tenant's share. */
function poolOf(e: Environment, fail: Fail): Pick<Config, 'poolSize' | 'poolReserved' | 'poolPerTenant'> {
  const poolSize = e.TALLY_DB_POOL ?? 10;
  // A fifth of the pool for the server's own statements, and half of the rest per tenant.
  const poolReserved = e.TALLY_DB_POOL_RESERVED ?? (poolSize > 1 ? Math.max(1, Math.floor(poolSize / 5)) : 0);
  if (poolReserved > poolSize - 1)
    fail('TALLY_DB_POOL_RESERVED', `must be from 0 to ${poolSize - 1} (TALLY_DB_POOL − 1)`);
  const poolPerTenant = e.TALLY_DB_POOL_PER_TENANT ?? Math.max(1, Math.floor((poolSize - poolReserved) / 2));
  if (poolPerTenant > poolSize - poolReserved)
    fail(
      'TALLY_DB_POOL_PER_TENANT',
      `must be from 1 to ${poolSize - poolReserved} (TALLY_DB_POOL − TALLY_DB_POOL_RESERVED)`,
    );
  return { poolSize, poolReserved, poolPerTenant };
}
