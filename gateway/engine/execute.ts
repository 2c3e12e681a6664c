// One transaction per request. Everything a read needs is pipelined on one reserved connection:
// BEGIN READ ONLY; role, statement timeout, the claims and what SQL may read of the HTTP request
// (set_config … true = SET LOCAL, one prepared statement; on Citus the claims are a SET LOCAL of
// their own); the pre-request function; the statement(s); COMMIT — one round trip to Postgres. A write waits
// for its statement's result before it decides COMMIT or ROLLBACK (max-affected, tx=rollback,
// singular responses), so a refused write leaves the database as it was.

import type { Row } from 'postgres';
import type { AuthContext, GatewayTiming } from './call.js';
import { ApiError } from './errors/catalogue.js';
import {
  isConnectionError,
  isPgError,
  toApiError,
  type ErrorWording,
  type PgErrorContext,
} from './errors/translate.js';
import { WATCHDOG_MARGIN_MS, watched, watchedFrom, type Lease, type Pool } from './pool.js';
import {
  compile,
  compiledOnce,
  ident,
  join,
  literal,
  run,
  sql,
  withClaims,
  type CompiledSql,
  type Fragment,
} from './sql.js';
import { errorFields, log } from './log.js';
import type { EngineConfig } from './config.js';
import type { HttpContext } from './request/http-context.js';

/**
 * What every transaction of a deployment shares, from its configuration: made once per gateway
 * (transactionSettings), so that every kind of request (a read, a write, a call, the OpenAPI
 * description) runs with the same role rules, pre-request function and limits.
 */
export interface TransactionSettings {
  anonRole: string;
  /** Roles that may only read (EngineConfig): their refused writes are answered as such. */
  readOnlyRoles: string[];
  preRequest: string | undefined;
  statementTimeoutMs: number;
  /** The JWT claim naming the caller's tenant, whose share of the pool a transaction counts against. */
  tenantClaim: string;
  /** work_mem of the transaction (a Postgres size); undefined keeps the database's. */
  workMem?: string;
  /** The transaction's search_path for the schema a request addresses. */
  searchPath(schema: string | undefined): string;
  /** The deployment's wording of database errors (createGateway's options). */
  wording: ErrorWording;
}

/** What a plan decides of its transaction (plan/action.ts). */
export interface TransactionMode {
  readOnly: boolean;
  /** For error messages: the request is a write. */
  write: boolean;
  /**
   * The exposed schema the request addresses: the transaction's search_path is it and the extra
   * search path, as PostgREST sets it, so functions may name its tables and sequences unqualified.
   */
  schema?: string;
}

/**
 * One transaction's options: the gateway's settings and the plan's mode as they are, not copied
 * into one object (every request makes this one; a copy of their members by spread cost V8 a
 * slow path of several microseconds a request).
 */
export interface TransactionOptions {
  settings: TransactionSettings;
  mode: TransactionMode;
  auth: AuthContext;
  request: HttpContext;
  /** The claims are a SET LOCAL of their own (SchemaCache.propagatesSetLocal), not a setting of the setup statement. */
  setLocalClaims: boolean;
}

/** The settings every transaction of a gateway runs with: the one place they are read from the configuration. */
export function transactionSettings(config: EngineConfig, wording: ErrorWording = {}): TransactionSettings {
  return {
    anonRole: config.anonRole,
    readOnlyRoles: config.readOnlyRoles,
    preRequest: config.preRequest,
    statementTimeoutMs: config.statementTimeoutMs,
    tenantClaim: config.tenantClaim,
    workMem: config.workMem,
    searchPath: searchPaths(config.extraSearchPath),
    wording,
  };
}

/** What a transaction answered: the rows of each statement, its time, and whether AuthContext.verify passed. */
export interface TransactionResult<T = never> {
  rows: Row[][];
  timing: GatewayTiming;
  verified: boolean;
  /** What the guard answered when it stopped the transaction (then `rows` is empty). */
  stopped?: T;
}

/**
 * The end of a write transaction: decided from its results (throwing rolls back and fails),
 * or known beforehand, when it is sent with the statements in the same round trip.
 */
export type Decide = ((results: Row[][]) => Ending) | 'commit' | 'rollback';

/** How a decided transaction ends: COMMIT or ROLLBACK, or a last statement and COMMIT (sent together). */
type Ending = 'commit' | 'rollback' | { last: CompiledSql };

/**
 * A statement run first, alone, after the transaction's setup: `stop` reads its rows and
 * answers a value to end the transaction there (rolled back, the statements never sent), or
 * undefined to go on. An idempotent write's claim of its key (plan/action.ts).
 */
export interface Guard<T> {
  statement: CompiledSql;
  stop(rows: Row[]): T | undefined;
}

const BEGIN_READ_ONLY = compile(sql`BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY`);
const BEGIN = compile(sql`BEGIN ISOLATION LEVEL READ COMMITTED`);
const COMMIT = compile(sql`COMMIT`);
const ROLLBACK = compile(sql`ROLLBACK`);

/**
 * Role, statement timeout and search_path of the transaction, the claims, and the HTTP request's
 * headers, cookies, method and path (request/http-context.ts), as SET LOCAL sets them: parameters of
 * the one prepared statement every request sends anyway, so they cost no statement, no parse and
 * no round trip. A distributed database (Citus) does not copy set_config() to its workers, so
 * there the claims, which row-level security reads on every server, are a SET LOCAL of their own
 * (claimsStatement), and a policy evaluated on a worker reads the request's headers, cookies,
 * method and path unset; functions, triggers and policies run on the coordinator read them. A
 * SET LOCAL of each would be four statements more per request, unprepared since their text
 * would be the values; policies that decide access read the claims, which every server gets.
 */
const SETTINGS = [
  sql`'role'`,
  sql`'statement_timeout'`,
  sql`'search_path'`,
  sql`'request.headers'`,
  sql`'request.cookies'`,
  sql`'request.method'`,
  sql`'request.path'`,
];
const CLAIMS = sql`'request.jwt.claims'`;
const WORK_MEM = sql`'work_mem'`;
/**
 * One statement of set_config(name, $n, true) for each name, its values in the names' order. It
 * answers a row without columns: set_config() returns the value it set, and the request's
 * headers and claims would come back over the wire to be read and dropped. (A sub-select whose
 * columns call a volatile function is neither merged into the outer one nor pruned of them.)
 */
const setupOf = (names: readonly Fragment[]) =>
  compiledOnce(names.length, (...values) => {
    const sets = names.map((name, i) => sql`pg_catalog.set_config(${name}, ${values[i]!}::text, true)`);
    return sql`SELECT FROM (SELECT ${join(sets)}, pg_catalog.set_config('response.headers', '', true), pg_catalog.set_config('response.status', '', true)) AS "pgrst_setup"`;
  });
/** The setup statements by whether they set the claims and work_mem (SETTINGS, then those two). */
const SETUPS = {
  claims: { workMem: setupOf([...SETTINGS, CLAIMS, WORK_MEM]), none: setupOf([...SETTINGS, CLAIMS]) },
  setLocal: { workMem: setupOf([...SETTINGS, WORK_MEM]), none: setupOf(SETTINGS) },
};

/**
 * search_path values by schema, each made once: the schema, then the extra search path, every
 * name quoted, as PostgREST writes it (`"api", "public", "extensions"`).
 */
function searchPaths(extra: string[]): (schema: string | undefined) => string {
  const paths = new Map<string | undefined, string>();
  return (schema) => {
    let path = paths.get(schema);
    if (path === undefined) {
      const names = schema === undefined ? extra : [schema, ...extra];
      path = names.map((n) => `"${n.replaceAll('"', '""')}"`).join(', ');
      paths.set(schema, path);
    }
    return path;
  };
}

/** The transaction's role and limits in one statement; only its values are made per request. */
function setupStatement(opts: TransactionOptions): CompiledSql {
  const { headers, cookies, method, path } = opts.request;
  const { settings } = opts;
  // In the order of SETTINGS.
  const values = [
    opts.auth.role,
    String(settings.statementTimeoutMs),
    settings.searchPath(opts.mode.schema),
    headers,
    cookies,
    method,
    path,
  ];
  if (!opts.setLocalClaims) values.push(claimsJson(opts.auth.claims));
  const setups = opts.setLocalClaims ? SETUPS.setLocal : SETUPS.claims;
  return settings.workMem ? setups.workMem(...values, settings.workMem) : setups.none(...values);
}

/**
 * The claims with SET LOCAL rather than set_config(), where the database copies a SET LOCAL to
 * every server its transaction reaches (Citus, with citus.propagate_set_commands = 'local'), so
 * that row-level security there reads the claims too. SET takes no parameter, so the claims'
 * JSON is a quoted literal (literal(), sql.ts), and the statement is not prepared: its text is
 * the claims'.
 */
export const claimsStatement = (json: string): CompiledSql =>
  compile(sql`SET LOCAL request.jwt.claims = ${literal(json)}`);

/** The pre-request function (a configured, possibly schema-qualified name), called without arguments. */
const preRequestStatements = new Map<string, CompiledSql>();
function preRequestStatement(name: string): CompiledSql {
  let statement = preRequestStatements.get(name);
  if (!statement) {
    statement = compile(sql`SELECT ${join(name.split('.').map(ident), sql`.`)}()`);
    preRequestStatements.set(name, statement);
  }
  return statement;
}

/** Runs `statements` (compiled by the query stage) in one transaction; see the top of this file. */
export async function runTransaction<T = never>(
  db: Pool,
  opts: TransactionOptions,
  statements: readonly CompiledSql[],
  decide?: Decide,
  guard?: Guard<T>,
): Promise<TransactionResult<T>> {
  for (let attempt = 1; ; attempt++) {
    const asked = performance.now();
    let lease: Lease;
    try {
      lease = await db.reserve(shareKey(opts.auth, opts.settings.tenantClaim));
    } catch (err) {
      throw databaseError(err, errorContextOf(opts)); // the database is away: a 503 (errors/translate.ts)
    }
    const reserved = performance.now();
    const timing = (): GatewayTiming => ({ poolMs: reserved - asked, dbMs: performance.now() - reserved });
    const tx = new Transaction(lease, opts, db.acquireTimeoutMs);
    try {
      const answered = await tx.run(statements, decide, guard);
      lease.release();
      return { rows: answered.rows, verified: answered.verified, stopped: answered.stopped, timing: timing() };
    } catch (err) {
      await tx.leave(err);
      if (attempt < ATTEMPTS && isTransientConflict(err)) {
        log.warn({ code: err.code, attempt }, 'transaction rolled back by a transient conflict; running it again');
        continue;
      }
      throw databaseError(err, errorContextOf(opts)).withTiming(timing());
    }
  }
}

/**
 * How many times a transaction runs when Postgres rolls it back for a conflict with another
 * transaction rather than for anything in it.
 */
const ATTEMPTS = 3;

/**
 * A deadlock (40P01: Postgres, or Citus's detector across nodes, for instance against a shard
 * move that locks a colocation group) or a serialization failure (40001: an idempotency key
 * claimed at the same moment) cancels a transaction that would have succeeded a moment later.
 * Postgres has then rolled all of it back (on every node: nothing was prepared), and nothing was
 * sent to the client, so it runs again as it was, as Postgres's manual advises; the write is
 * made once.
 */
const isTransientConflict = (err: unknown): err is { code: string } =>
  isPgError(err) && (err.code === '40P01' || err.code === '40001');

/** What Postgres errors of this transaction mean to the caller (errors/translate.ts words them). */
function errorContextOf({ settings, mode, auth }: TransactionOptions): PgErrorContext {
  return {
    anonymous: auth.role === settings.anonRole,
    readOnlyWrite: mode.write && settings.readOnlyRoles.includes(auth.role),
    readOnlyTransaction: mode.readOnly,
    statementTimeoutMs: settings.statementTimeoutMs,
    ...settings.wording,
  };
}

/**
 * One transaction on its reserved connection, its statements sent pipelined. It keeps what is
 * in flight (cancelled when the connection must be destroyed) and whether the transaction is
 * still open (rolled back when it failed with a Postgres error).
 */
class Transaction {
  private open = false;
  private pending: Promise<unknown>[] = [];
  /** The claims' statement, whose text is the claims': never prepared. */
  private claims: CompiledSql | undefined;
  private readonly deadline: number;

  constructor(
    private readonly lease: Lease,
    private readonly opts: TransactionOptions,
    /** How long BEGIN may go unanswered (Pool.acquireTimeoutMs): see send(). */
    private readonly answerMs: number,
  ) {
    const ms = opts.settings.statementTimeoutMs;
    this.deadline = ms > 0 ? ms + WATCHDOG_MARGIN_MS : 0;
  }

  /** BEGIN and the setup (and the guard, alone), the statements, then the end the plan decided. */
  async run<T>(
    statements: readonly CompiledSql[],
    decide: Decide | undefined,
    guard: Guard<T> | undefined,
  ): Promise<Omit<TransactionResult<T>, 'timing'>> {
    const { opts } = this;
    if (opts.setLocalClaims) this.claims = claimsOf(opts.auth.claims);
    const setup = setupStatements(opts, this.claims);
    // A read commits, and a write whose end does not depend on its results ends, in the same
    // round trip as its statements.
    const pipelined = decide === undefined ? 'commit' : typeof decide === 'string' ? decide : undefined;
    const head = [opts.mode.readOnly ? BEGIN_READ_ONLY : BEGIN, ...setup, ...(guard ? [guard.statement] : [])];
    // The statements and, when it is known, the end; after the guard's answer when there is one.
    const body = [
      ...statements.map((s) => withClaims(s, opts.auth.claims)),
      ...(pipelined ? [pipelined === 'commit' ? COMMIT : ROLLBACK] : []),
    ];
    this.open = true;
    let settled = await this.send(guard ? head : [...head, ...body], true);
    if (pipelined && !guard) this.open = false; // COMMIT of a failed transaction rolls it back
    // The caller's check is the last setup statement: did it run and raise nothing?
    const verified = opts.auth.verify !== undefined && settled[setup.length]?.status === 'fulfilled';
    throwFirstFailure(settled);
    if (guard) {
      const stopped = guard.stop(rowsOf(settled[head.length - 1]!));
      if (stopped !== undefined) {
        await this.rollBack();
        return { rows: [], verified, stopped };
      }
      settled = await this.send(body);
      if (pipelined) this.open = false;
      throwFirstFailure(settled);
    }
    const first = guard ? 0 : head.length;
    const rows = settled.slice(first, first + statements.length).map(rowsOf);
    if (this.open && typeof decide === 'function') await this.end(decide(rows));
    return { rows, verified };
  }

  /**
   * Sends statements pipelined and waits, up to the watchdog's deadline, for all of their
   * answers. The first batch starts with BEGIN, which Postgres answers at once, whatever runs
   * after it: a connection that leaves it unanswered for as long as a request may wait for a
   * connection is taken for lost then (a server stopped or cut off without closing the socket),
   * not after the statement timeout and the watchdog's margin.
   */
  private send(statements: readonly CompiledSql[], begins = false): Promise<PromiseSettledResult<unknown>[]> {
    this.pending = statements.map((s) => {
      if (s === this.claims) return run(this.lease.sql, s, false);
      this.lease.prepared(s.text);
      return run(this.lease.sql, s);
    });
    const all = Promise.allSettled(this.pending);
    return begins ? watchedFrom(all, this.deadline, this.pending[0], this.answerMs) : watched(all, this.deadline);
  }

  /** Ends the transaction as the plan decided from its results. */
  private async end(ending: Ending): Promise<void> {
    const last = typeof ending === 'object' ? [ending.last] : [];
    const ended = await this.send([...last, ending === 'rollback' ? ROLLBACK : COMMIT]);
    this.open = false; // a COMMIT after a failed last statement rolls back
    throwFirstFailure(ended);
  }

  /** Ends the transaction where the guard stopped it. */
  private async rollBack(): Promise<void> {
    await watched(run(this.lease.sql, ROLLBACK), this.deadline);
    this.open = false;
  }

  /**
   * Gives the connection back after `err`. A connection that answered with a Postgres error, or
   * whose statements all answered before the plan refused their results (an ApiError: a
   * singular answer of more than one row, max-affected), is in a known state: it is rolled back
   * and kept. Anything else (lost, stalled past the watchdog, a protocol or client error)
   * destroys it: its backend is cancelled, its slot gets a new connection, and Postgres rolls
   * back the transaction of a closed connection itself.
   */
  async leave(err: unknown): Promise<void> {
    if ((isPgError(err) && !isConnectionError(err)) || err instanceof ApiError) {
      const clean =
        !this.open ||
        (await watched(run(this.lease.sql, ROLLBACK), this.deadline).then(
          () => true,
          () => false,
        ));
      if (clean) this.lease.release();
      else this.lease.destroy(this.pending);
    } else this.lease.destroy(this.pending);
  }
}

/**
 * After BEGIN: role, limits and claims (their SET LOCAL apart where one is needed), the
 * pre-request function, then the caller's own check (AuthContext.verify); once, when the
 * pre-request function is that very statement.
 */
function setupStatements(opts: TransactionOptions, claims: CompiledSql | undefined): CompiledSql[] {
  const name = opts.settings.preRequest;
  const preRequest = name ? preRequestStatement(name) : undefined;
  const verify = opts.auth.verify?.text === preRequest?.text ? undefined : opts.auth.verify;
  return [
    setupStatement(opts),
    ...(claims ? [claims] : []),
    ...(preRequest ? [preRequest] : []),
    ...(verify ? [verify] : []),
  ];
}

function throwFirstFailure(settled: PromiseSettledResult<unknown>[]): void {
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
}

/** The rows of a statement that succeeded (throwFirstFailure ran first). */
const rowsOf = (settled: PromiseSettledResult<unknown>): Row[] => (settled as PromiseFulfilledResult<Row[]>).value;

/**
 * Whose share of the pool a transaction counts against: its tenant (the configured claim), else
 * its role (every request without one shares one share).
 */
function shareKey(auth: AuthContext, tenantClaim: string): string {
  const known = tenantKeys.get(auth.claims);
  if (known?.claim === tenantClaim) return known.key;
  const tenant = auth.claims[tenantClaim];
  if ((typeof tenant !== 'string' || tenant === '') && typeof tenant !== 'number') return `role:${auth.role}`;
  const key = `tenant:${tenant}`;
  tenantKeys.set(auth.claims, { claim: tenantClaim, key });
  return key;
}

/**
 * The tenant's key by claims object (claims are never changed once made): the one string every
 * request of a verified JWT counts against, not a new one each time to hash into the pool's maps.
 */
const tenantKeys = new WeakMap<object, { claim: string; key: string }>();

/**
 * The claims as JSON, and their SET LOCAL statement, made once per claims object: a caller that
 * gives its requests one claims object (a JWT verified before) has them made once, not per
 * request. Claims are never changed once made.
 */
const claimsJsons = new WeakMap<object, string>();
function claimsJson(claims: Record<string, unknown>): string {
  let json = claimsJsons.get(claims);
  if (json === undefined) claimsJsons.set(claims, (json = JSON.stringify(claims)));
  return json;
}
const claimsStatements = new WeakMap<object, CompiledSql>();
function claimsOf(claims: Record<string, unknown>): CompiledSql {
  let statement = claimsStatements.get(claims);
  if (statement === undefined) claimsStatements.set(claims, (statement = claimsStatement(claimsJson(claims))));
  return statement;
}

function databaseError(err: unknown, ctx: PgErrorContext): ApiError {
  if (err instanceof ApiError) return err;
  const mapped = toApiError(err, ctx).error;
  // The client gets the one error shape and nothing internal; the log gets what happened.
  if (mapped.status >= 500)
    log.error({ ...errorFields(err), status: mapped.status }, 'request failed in the database layer');
  return mapped;
}
