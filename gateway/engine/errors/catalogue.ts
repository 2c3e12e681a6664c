// Every error the engine answers, in one closed list: code, HTTP status, message template and
// when it happens. An ApiError is made only by an entry (its constructor needs a token this
// module keeps), so a new error starts with a new entry: here for the engine, in the app's own
// catalogue (gateway/errors.ts) for its surfaces. The table of docs/errors.md is checked against
// both lists (tests/unit/error-catalogue.test.ts).
//
// Codes: PostgREST's PGRST### mean exactly what they mean in PostgREST; PT### and SQLSTATEs come
// from the database (`RAISE sqlstate 'PT402'` answers 402) or follow that convention; TLY0xx are
// the server's own (a bug, a body or response too large, a database that accepts no writes).

/** PGRST201 lists the candidate relationships as objects, as PostgREST does. */
export type ErrorDetails = string | null | Record<string, string>[];

export interface ErrorBody {
  code: string;
  message: string;
  details: ErrorDetails;
  hint: string | null;
}

const MADE_HERE: unique symbol = Symbol('error catalogue');

export class ApiError extends Error {
  constructor(
    made: typeof MADE_HERE,
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetails = null,
    readonly hint: string | null = null,
    readonly headers: Record<string, string> = {},
    /** The database time of the call that failed with it, when it got as far as a transaction. */
    readonly timing?: { poolMs: number; dbMs: number },
  ) {
    super(message);
    if (made !== MADE_HERE) throw new TypeError('errors are made through the catalogue');
  }

  body(): ErrorBody {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint };
  }

  /** The same error with a hint fit for another surface (MCP says where its token goes). */
  withHint(hint: string): ApiError {
    return new ApiError(MADE_HERE, this.status, this.code, this.message, this.details, hint, this.headers, this.timing);
  }

  /** The same error with the database time of the call that failed with it (GatewayTiming). */
  withTiming(timing: { poolMs: number; dbMs: number }): ApiError {
    return new ApiError(MADE_HERE, this.status, this.code, this.message, this.details, this.hint, this.headers, timing);
  }
}

interface Parts {
  message: string;
  details?: ErrorDetails;
  hint?: string | null;
  headers?: Record<string, string>;
  /** Only for entries whose status and code are decided per error (the database's). */
  status?: number;
  code?: string;
}

/** One catalogue entry: a builder with its code, status and when it happens attached. */
export interface Entry {
  readonly code: string;
  /** A number, or how the status is decided for the database's codes. */
  readonly status: number | string;
  readonly when: string;
}

/**
 * A catalogue entry: the one way to make an ApiError. The engine's entries are below; a
 * deployment's catalogue of its own errors (gateway/errors.ts) makes its entries with it too.
 */
export function entry<A extends unknown[]>(
  code: string,
  status: number | string,
  when: string,
  parts: (...args: A) => Parts,
): ((...args: A) => ApiError) & Entry {
  const build = (...args: A): ApiError => {
    const p = parts(...args);
    const fixed = typeof status === 'number';
    return new ApiError(
      MADE_HERE,
      fixed ? status : (p.status ?? 500),
      fixed ? code : (p.code ?? code),
      p.message,
      p.details ?? null,
      p.hint ?? null,
      p.headers ?? {},
    );
  };
  return Object.assign(build, { code, status, when });
}

type Text = string | null;

/** PostgREST's message for a body that is empty or not JSON (PGRST102), on every surface. */
export const INVALID_JSON = 'Empty or invalid json';
const RETRY_AFTER_SECONDS = 2;
const retryLater = { 'Retry-After': String(RETRY_AFTER_SECONDS) };

/**
 * The errors of a name the schema cache does not hold (a relationship, a function, a column, a
 * table), which a schema change may be about to add.
 */
const SCHEMA_CACHE_MISSES = new Set(['PGRST200', 'PGRST202', 'PGRST204', 'PGRST205']);

/** PostgREST's hint of a PGRST202 that suggests no other call. */
export const NEW_FUNCTION_HINT =
  'If a new function was created in the database with this name and parameters, try reloading the schema cache.';

/**
 * `err` as answered while the schema cache reloads after a change in the database: a miss that
 * suggests no other name says that this one may be served in a moment (PostgREST, whose cache
 * reloads only when asked, says to ask).
 */
export function whileReloading(err: ApiError): ApiError {
  if (!SCHEMA_CACHE_MISSES.has(err.code) || (err.hint !== null && err.hint !== NEW_FUNCTION_HINT)) return err;
  return err.withHint('The schema cache is reloading after a change in the database; retry the request in a moment');
}

export const catalogue = {
  // ---- the database connection (PGRST0xx) ----
  couldNotConnect: entry('PGRST000', 503, 'no connection with the database could be made', () => ({
    message: 'Could not connect with the database',
    hint: `The database is not available at the moment; retry in ${RETRY_AFTER_SECONDS} seconds`,
    headers: retryLater,
  })),
  connectionLost: entry(
    'PGRST001',
    503,
    'the connection with the database was lost, or Postgres is shutting down',
    () => ({
      message: 'The connection with the database was lost',
      // Lost after the statement was sent, a write may have committed before the answer was:
      // a blind retry could record it twice.
      details: 'A write sent before the connection was lost may have been committed',
      hint: `Retry in ${RETRY_AFTER_SECONDS} seconds; after a write, read whether it was recorded before sending it again`,
      headers: retryLater,
    }),
  ),
  poolTimeout: entry(
    'PGRST003',
    504,
    'no pooled connection became free within the acquisition deadline',
    (ms: number) => ({
      message: 'Timed out acquiring a connection from the database pool',
      details: `waited ${ms} ms`,
      hint: `The database is busy or restarting; retry in ${RETRY_AFTER_SECONDS} seconds`,
      headers: retryLater,
    }),
  ),

  // ---- the request (PGRST1xx) ----
  parse: entry(
    'PGRST100',
    400,
    'a query parameter (select, filter, order, limit, logic tree) does not parse',
    (what: string, details: Text = null, hint: Text = null) => ({
      message: `"failed to parse ${what}"`,
      details,
      hint,
    }),
  ),
  parseAt: entry(
    'PGRST100',
    400,
    "a query parameter (select, filter, order, logic tree, columns) does not parse: PostgREST's place and words",
    (what: string, line: number, column: number, details: string) => ({
      message: `"failed to parse ${what}" (line ${line}, column ${column})`,
      details,
    }),
  ),
  parseTooDeep: entry(
    'PGRST100',
    400,
    'a query parameter nests parentheses deeper than the parser follows',
    (max: number) => ({
      message: 'A query parameter nests parentheses too deeply',
      details: `at most ${max} levels`,
      hint: 'Nest fewer embedded resources or logic trees',
    }),
  ),
  pathEncoding: entry('PGRST100', 400, 'the request path is not valid percent-encoding', () => ({
    message: 'Invalid percent-encoding in the request path',
    hint: 'Encode "%" in a path as %25',
  })),
  queryEncoding: entry('PGRST100', 400, 'the query string is not valid percent-encoding of UTF-8', () => ({
    message: 'Invalid percent-encoding in the query string',
    hint: 'Encode "%" in a query value as %25, and other bytes as UTF-8',
  })),
  selectTooDeep: entry(
    'PGRST100',
    400,
    'the select nests embedded resources deeper than TALLY_DB_MAX_EMBED_DEPTH',
    (max: number) => ({
      message: 'The select nests embedded resources too deeply',
      details: `at most ${max} levels of embedding`,
      hint: 'Embed fewer levels, or read the deeper resources with a request of their own',
    }),
  ),
  selectTooWide: entry(
    'PGRST100',
    400,
    'the select names more items than TALLY_DB_MAX_SELECT_WIDTH',
    (width: number, max: number) => ({
      message: 'The select names too many columns and embedded resources',
      details: `${width} items, at most ${max}`,
      hint: 'Select fewer columns',
    }),
  ),
  mutationEmbedFilter: entry(
    'PGRST100',
    400,
    'a PATCH or DELETE filters on an embedded resource',
    (method: string) => ({
      message: `${method} cannot filter on embedded resources`,
      hint: 'Filter on columns of the table itself',
    }),
  ),
  limitWithoutOrder: entry('PGRST109', 400, 'a PATCH or DELETE has a limit but no order', () => ({
    message: "A 'limit' was applied without an explicit 'order'",
    hint: "Apply an 'order' using unique column(s)",
  })),
  putLimit: entry('PGRST114', 400, 'a PUT has limit or offset', () => ({
    message: 'limit/offset querystring parameters are not allowed for PUT',
  })),
  putColumns: entry('PGRST100', 400, 'a PUT has columns=', () => ({ message: 'columns= is not supported with PUT' })),
  rpcMethod: entry(
    'PGRST101',
    405,
    'a function is called with a method other than GET, HEAD or POST',
    (method: string) => ({
      message: `Cannot use the ${method} method on RPC`,
      hint: 'Call functions with GET or POST',
    }),
  ),
  invalidBody: entry(
    'PGRST102',
    400,
    'the request body is missing, is not valid JSON, CSV or form data, has the wrong shape or values, or cannot be read as sent (a gzip body that is not gzip)',
    (message: string, details: Text = null, hint: Text = null) => ({
      message,
      details,
      hint,
    }),
  ),
  rangeNotSatisfiable: entry(
    'PGRST103',
    416,
    'the Range or offset starts past the rows there are',
    (details: string, headers: Record<string, string> = {}) => ({
      message: 'Requested range not satisfiable',
      details,
      headers,
    }),
  ),
  invalidPut: entry('PGRST105', 405, 'a PUT does not filter on exactly the primary key with eq', (hint: string) => ({
    message: "Filters must include all and only primary key columns with 'eq' operators",
    hint,
  })),
  schemaNotExposed: entry(
    'PGRST106',
    406,
    'Accept-Profile or Content-Profile names a schema that is not exposed',
    (schemas: string[], hint: string) => ({
      message: `The schema must be one of the following: ${schemas.join(', ')}`,
      hint,
    }),
  ),
  notAcceptable: entry(
    'PGRST107',
    406,
    'the Accept header asks for no media type the server gives',
    (accept: string | undefined, hint: string) => ({
      message: `None of these media types are available: ${accept}`,
      hint,
    }),
  ),
  unsupportedContentType: entry(
    'PGRST107',
    415,
    'the Content-Type of a write is not one the path reads (JSON, form data or CSV on /rest/v1; JSON on /api/v1)',
    (type: string, hint: string = 'Send application/json, application/x-www-form-urlencoded or text/csv') => ({
      message: `Content-Type not acceptable: ${type}`,
      hint,
    }),
  ),
  notEmbedded: entry(
    'PGRST108',
    400,
    'a filter, order or limit names a resource the select does not embed',
    (path: string, hint: string) => ({
      message: `'${path}' is not an embedded resource in this request`,
      hint,
    }),
  ),
  putPkMismatch: entry(
    'PGRST115',
    400,
    'a PUT body carries primary key values other than its filters',
    (hint: string) => ({
      message: 'Payload values do not match URL in primary key column(s)',
      hint,
    }),
  ),
  singular: entry(
    'PGRST116',
    406,
    'vnd.pgrst.object+json was asked for and the result is not exactly one row',
    (rows: number) => ({
      message: 'Cannot coerce the result to a single JSON object',
      details: `The result contains ${rows} rows`,
    }),
  ),
  unsupportedMethod: entry(
    'PGRST117',
    405,
    'the HTTP method is not one the path serves (with the methods it serves in Allow)',
    (method: string, allow?: string[], hint?: string) => ({
      message: `Unsupported HTTP method: ${method}`,
      hint,
      headers: allow ? { Allow: allow.join(', ') } : undefined,
    }),
  ),
  relatedOrder: entry(
    'PGRST118',
    400,
    'an order names a to-many embedded resource',
    (relation: string, details: string) => ({
      message: `A related order on '${relation}' is not possible`,
      details,
    }),
  ),
  badHeadersSetting: entry(
    'PGRST111',
    500,
    "the request's SQL set response.headers to something else than one-key objects of text",
    () => ({
      message: 'response.headers guc must be a JSON array composed of objects with a single key and a string value',
    }),
  ),
  badStatusSetting: entry(
    'PGRST112',
    500,
    "the request's SQL set response.status to something else than a status code",
    () => ({
      message: 'response.status guc must be a valid status code',
    }),
  ),
  raisedUnparseable: entry('PGRST121', 500, "a function's RAISE SQLSTATE 'PGRST' carries no valid JSON", () => ({
    message: "Could not parse JSON in the RAISE SQLSTATE 'PGRST' error",
    hint: 'The message must be a JSON object of code, message, details, hint; the detail one of status and headers',
  })),
  strictPreferences: entry(
    'PGRST122',
    400,
    'Prefer: handling=strict comes with a preference the server does not know',
    (invalid: string[]) => ({
      message: 'Invalid preferences given with handling=strict',
      details: `Invalid preferences: ${invalid.join(', ')}`,
    }),
  ),
  aggregatesDisabled: entry(
    'PGRST123',
    400,
    'the select uses an aggregate while TALLY_DB_AGGREGATES_ENABLED is off',
    () => ({
      message: 'Use of aggregate functions is not allowed',
      hint: 'Aggregates are off on this server (TALLY_DB_AGGREGATES_ENABLED)',
    }),
  ),
  maxAffected: entry(
    'PGRST124',
    400,
    'a write with Prefer: handling=strict, max-affected=n would change more rows (nothing is changed)',
    (affected: number) => ({
      message: 'Query result exceeds max-affected preference constraint',
      details: `The query affects ${affected} rows`,
    }),
  ),
  invalidPath: entry('PGRST125', 404, 'no surface serves the path', (hint?: string) => ({
    message: 'Invalid path specified in request URL',
    hint,
  })),

  // ---- the schema cache (PGRST2xx) ----
  noRelationship: entry(
    'PGRST200',
    400,
    'an embed names a resource with no foreign key relationship to its parent',
    (source: string, name: string, details: string, close?: string) => ({
      message: `Could not find a relationship between '${source}' and '${name}' in the schema cache`,
      details,
      hint: close ? `Perhaps you meant '${close}' instead of '${name}'.` : null,
    }),
  ),
  ambiguousEmbed: entry(
    'PGRST201',
    300,
    'an embed matches more than one relationship and names no hint',
    (source: string, name: string, details: Record<string, string>[], hint: string) => ({
      message: `Could not embed because more than one relationship was found for '${source}' and '${name}'`,
      details,
      hint,
    }),
  ),
  noFunction: entry(
    'PGRST202',
    404,
    'no function of that name takes these arguments',
    (signature: string, details: string, hint: string | null) => ({
      message: `Could not find the function ${signature} in the schema cache`,
      details,
      hint,
    }),
  ),
  ambiguousFunction: entry(
    'PGRST203',
    300,
    'overloaded functions match the arguments equally well',
    (candidates: string[]) => ({
      message: `Could not choose the best candidate function between: ${candidates.join(', ')}`,
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    }),
  ),
  noColumn: entry(
    'PGRST204',
    400,
    'a write body or columns= names a column the table does not have',
    (column: string, table: string, hint: Text) => ({
      message: `Could not find the '${column}' column of '${table}' in the schema cache`,
      hint,
    }),
  ),
  noTable: entry(
    'PGRST205',
    404,
    'the path names a table or view that is not in the exposed schema',
    (qualified: string, hint: Text) => ({
      message: `Could not find the table '${qualified}' in the schema cache`,
      hint,
    }),
  ),

  // ---- credentials (PGRST3xx) ----
  invalidCredential: entry(
    'PGRST301',
    401,
    'a JWT, API key or workspace token cannot be decoded, is unknown, revoked, or sent twice',
    (reason: string, hint: Text, headers: Record<string, string>) => ({
      message: reason,
      hint,
      headers,
    }),
  ),
  noCredential: entry(
    'PGRST302',
    401,
    'a surface that needs a token got none',
    (reason: string, hint: string, headers: Record<string, string> = {}) => ({
      message: reason,
      hint,
      headers,
    }),
  ),
  invalidClaims: entry(
    'PGRST303',
    401,
    "a JWT's claims fail validation: expired, wrong audience, a role that is not an API role",
    (reason: string, hint: Text, headers: Record<string, string>) => ({
      message: reason,
      hint,
      headers,
    }),
  ),

  // ---- PostgREST's convention for statuses: PT### answers ### ----
  rateLimited: entry(
    'PT429',
    429,
    'a token or address went over the request rate, failed authentication limit or its share of the pool',
    (message: string, details: Text, hint: string, headers: Record<string, string> = {}) => ({
      message,
      details,
      hint,
      headers,
    }),
  ),

  // ---- Postgres's own codes, for refusals the gateway makes before the database would ----
  unfilteredMutation: entry('21000', 400, 'a PATCH or DELETE has no filter', (method: string) => ({
    message: `${method} requires a filter: a ${method} without one would change every row`,
    hint: `Add a filter such as ?id=eq.<id>. To really ${method === 'DELETE' ? 'delete' : 'update'} every row, say so with a filter every row matches, e.g. ?id=not.is.null`,
  })),
  readOnly: entry('42501', 403, 'a read-only token tried to write', (details: Text = null, hint: Text = null) => ({
    message: 'This token is read-only: it cannot create, change or delete data',
    details,
    hint,
  })),
  undefinedColumn: entry(
    '42703',
    400,
    'a select, filter or order names a column the table does not have',
    (table: string, column: string, hint: Text) => ({
      message: `column ${table}.${column} does not exist`,
      hint,
    }),
  ),
  embeddedTwice: entry(
    '42712',
    400,
    'a select embeds two resources under one name (no alias tells them apart)',
    (table: string) => ({ message: `table name "${table}" specified more than once` }),
  ),
  undefinedType: entry('42704', 400, 'a cast names a type that does not exist', (name: string) => ({
    message: `type "${name}" does not exist`,
    hint: 'Cast to a built-in type such as text, integer, numeric or date',
  })),

  // ---- from the database ----
  database: entry(
    'SQLSTATE',
    'by SQLSTATE',
    "any other error of Postgres: its SQLSTATE and text, the status as PostgREST maps it (a function's RAISE sqlstate 'PT402' answers 402)",
    (
      status: number,
      sqlstate: string,
      message: string,
      details: Text,
      hint: Text,
      headers: Record<string, string>,
    ) => ({
      status,
      code: sqlstate,
      message,
      details,
      hint,
      headers,
    }),
  ),
  raised: entry(
    'custom',
    'custom',
    "a function's RAISE SQLSTATE 'PGRST' decides code, message, status and headers",
    (status: number, code: string, message: string, details: Text, hint: Text, headers: Record<string, string>) => ({
      status,
      message,
      details,
      hint,
      headers,
      code,
    }),
  ),

  // ---- Tally's own: the server (TLY0xx) ----
  internal: entry(
    'TLY000',
    500,
    'a bug: anything unexpected; the server log has the details, the client nothing internal',
    () => ({
      message: 'Internal server error',
      hint: 'This is a bug in Tally; the server log has the details',
    }),
  ),
  databaseReadOnly: entry(
    'TLY003',
    503,
    'the database accepts no writes: a hot standby, in recovery, or default_transaction_read_only',
    () => ({
      message: 'The database is read-only',
      details: 'Tally writes on every request (rate-limit counters, token use) and needs a writable primary',
      hint: `Point TALLY_DB_URI at the primary (several hosts with target_session_attrs=read-write pick it); retry in ${RETRY_AFTER_SECONDS} seconds`,
      headers: retryLater,
    }),
  ),
  workerLoginRefused: entry(
    'TLY004',
    503,
    "a worker of a sharded database (Citus) refused the coordinator's login as the request's role: the role's secret for the workers is missing or wrong, or a worker's pg_hba.conf refuses it",
    () => ({
      message: "A database worker refused the login of the request's role",
      details:
        'The coordinator could not log in to a worker as the role this request runs as; the server log names the worker and the role',
      hint: "An operator must fix it: run `tally migrate` against the coordinator (it gives each API role its secret in pg_dist_authinfo and on every worker), and check that the workers' pg_hba.conf admits the API roles from the coordinator",
    }),
  ),
  nodeUnreachable: entry(
    'TLY006',
    503,
    "a node behind the database (a worker of a sharded database, Citus; a foreign server) could not be reached for the request's data; the server's connection to the database is sound and kept",
    () => ({
      message: 'A database node is unreachable',
      details:
        "The database could not reach the node that holds this request's data; requests whose data other nodes hold are served. The server log names the node",
      hint: `Retry in ${RETRY_AFTER_SECONDS} seconds; if it lasts, an operator must bring the node back`,
      headers: retryLater,
    }),
  ),
  notIsolated: entry(
    'TLY005',
    403,
    'a table or view with the tenant column (TALLY_DB_TENANT_COLUMN), or a function returning its rows, is not isolated by row-level security (enabled, forced, with a policy), so it is not served',
    (kind: 'table' | 'view' | 'function', name: string, reason: string) => ({
      message: `The ${kind} '${name}' is not served: it is not isolated by row-level security`,
      details: reason,
      hint: 'An operator must isolate it: enable and force row-level security on the table and give it a policy; it is served from the next schema reload',
    }),
  ),
  bodyTooLarge: entry('TLY001', 413, 'the request body is larger than TALLY_MAX_BODY_BYTES', (limit?: number) => ({
    message: 'The request body is too large',
    details: limit === undefined ? null : `The limit is ${limit} bytes`,
    hint: 'Split a bulk insert into smaller batches',
  })),
  idempotencyKey: entry(
    'TLY020',
    400,
    'an Idempotency-Key header is empty, longer than 255 characters, or has a character other than visible ASCII',
    () => ({
      message: 'Invalid Idempotency-Key header',
      details: 'An idempotency key is 1 to 255 visible ASCII characters (no spaces)',
      hint: 'Send a new random key (a UUID) with each new create, and the same key with its retries',
    }),
  ),
  idempotencyKeyReused: entry(
    'TLY021',
    422,
    'an Idempotency-Key was sent within 24 hours with another request',
    (key: string) => ({
      message: 'This Idempotency-Key was used with a different request',
      details: `The key ${JSON.stringify(key)} was sent in the last 24 hours with another method, path, query, headers or body`,
      hint: 'Send the same request again to get its answer, or use a new key for a new request',
    }),
  ),
  keptAnswerTooLarge: entry(
    'TLY022',
    400,
    'a write sent with an Idempotency-Key answers more than TALLY_IDEMPOTENCY_MAX_ANSWER_BYTES, more than its key keeps for a retry (nothing is written)',
    (bytes: number, limit: number) => ({
      message: `The answer of this request is too large to keep for its Idempotency-Key: ${bytes} bytes`,
      details: `A key keeps an answer of at most ${limit} bytes for its retries; nothing was written`,
      hint: 'Ask for a smaller answer (Prefer: return=minimal, or fewer columns and embeds in select), or send the request without Idempotency-Key',
    }),
  ),
  responseTooLarge: entry(
    'TLY010',
    400,
    "a read's body would be larger than TALLY_DB_MAX_RESPONSE_BYTES (stopped while Postgres builds it)",
    (bytes: number, limit: number, building = false) => ({
      message: building
        ? `The response would be too large: more than ${bytes} bytes`
        : `The response would be too large: ${bytes} bytes`,
      details: `at most ${limit} bytes per response`,
      hint: 'Ask for fewer rows (limit and offset, or a Range header) or fewer columns (select)',
    }),
  ),
} as const;
