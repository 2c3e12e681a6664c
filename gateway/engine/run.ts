// Runs the gateway call (the one internal interface, see call.ts): plan (plan/action.ts), run
// the plan's statements (execute.ts), respond (response/). It knows no table by name; everything
// comes from the schema cache. Every kind of request is one ActionPlan, run the same way: its
// statements in one transaction that ends as the plan says, then the response stage shapes what
// they answered.

import { randomUUID } from 'node:crypto';
import type { AuthContext, GatewayCall, GatewayRequest, GatewayResponse } from './call.js';
import type { EngineContext, IdempotencyStore } from './config.js';
import { ApiError, catalogue, whileReloading } from './errors/catalogue.js';
import type { ErrorWording } from './errors/translate.js';
import type { Row } from 'postgres';
import { runTransaction, transactionSettings, type Decide, type TransactionOptions } from './execute.js';
import { defined } from './invariant.js';
import {
  actionPlan,
  changeLogOf,
  tenantOf,
  type ActionPlan,
  type Idempotency,
  type ReadAction,
} from './plan/action.js';
import { saveStatement } from './query/idempotency.js';
import { refuseDeepJson, routineName } from './request/parse.js';
import { httpContext } from './request/http-context.js';
import { affectedRows, respond, singularError, type DescribeSchema } from './response/index.js';
import { ChangeWatch } from './changes.js';
import { SchemaCacheHolder } from './schema-cache/index.js';
import type { SchemaCache } from './schema-cache/types.js';
import { Lru } from './lru.js';

const holders = new WeakMap<EngineContext, SchemaCacheHolder>();
const watches = new WeakMap<EngineContext, ChangeWatch>();

/** The database changes a server context watches: one watch per context, for every cache of it. */
export function changesOf(ctx: EngineContext): ChangeWatch {
  let w = watches.get(ctx);
  if (!w) watches.set(ctx, (w = new ChangeWatch(ctx.db)));
  return w;
}

/** The schema cache of a server context: one per context, shared by every surface. */
export function schemaCacheOf(ctx: EngineContext): SchemaCacheHolder {
  let h = holders.get(ctx);
  if (!h)
    holders.set(
      ctx,
      (h = new SchemaCacheHolder(ctx.db.control, ctx.config.schemas, ctx.config.tenantColumn, changesOf(ctx))),
    );
  return h;
}

/** Compiled reads kept per schema cache: a reload starts afresh, so no plan outlives its schema. */
const COMPILED_READS = 1000;
/**
 * The longest read kept compiled: characters of its key and its SQL. A read's SQL grows with its
 * select, embeds above all (a URL of 1,900 characters made 77,000), and its plan takes about three
 * times that in memory: 1,000 such reads took the process's heap 221 MB higher. A longer read is
 * planned at each request, so the cache holds about 50 MB at most; Tally's own surfaces' reads
 * have under 6,000.
 */
const COMPILED_READ_CHARS = 16_384;
const compiledReads = new WeakMap<SchemaCache['relations'], Lru<string, ReadAction>>();

const keptCompiled = (key: string, plan: ReadAction): boolean => {
  let chars = key.length;
  for (const s of plan.statements) chars += s.text.length;
  return chars <= COMPILED_READ_CHARS;
};

/** Keyed by the loaded cache's relations, which every request's view of that cache shares. */
export function compiledReadsOf(cache: SchemaCache): Lru<string, ReadAction> {
  let lru = compiledReads.get(cache.relations);
  if (!lru) compiledReads.set(cache.relations, (lru = new Lru(COMPILED_READS)));
  return lru;
}

/**
 * What a table read's plan depends on: relation, query string, role, and the headers the
 * parser reads (schema profile, Accept, Prefer, Range). Reads of a function are not cached (their
 * arguments are query keys); nor is anything else but GET and HEAD of a relation.
 */
function readKey(ctx: EngineContext, req: GatewayRequest, auth: AuthContext): string | undefined {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || req.relation === '' || routineName(req.relation) !== undefined)
    return undefined;
  const h = req.headers;
  return [
    req.method,
    req.schema ?? '',
    h['accept-profile'] ?? '',
    req.relation,
    req.query.toString(),
    auth.role,
    h.accept ?? '',
    h.prefer ?? '',
    h.range ?? '',
    tenantOf(ctx.config, auth) ? 't' : '',
  ].join('\0');
}

/** What a deployment adds to the engine's behaviour. */
export interface GatewayOptions extends ErrorWording {
  /**
   * The document a GET of the root answers (PostgREST's OpenAPI): the schema as the caller's
   * role may use it, written as the deployment describes itself. Without it the root is a 404.
   */
  describe?: DescribeSchema;
}

export function createGateway(ctx: EngineContext, options: GatewayOptions = {}): GatewayCall {
  const holder = schemaCacheOf(ctx);
  const { describe, ...wording } = options;
  const settings = transactionSettings(ctx.config, wording);
  const limits = { maxResponseBytes: ctx.config.maxResponseBytes, describe };
  return async (req: GatewayRequest, auth: AuthContext): Promise<GatewayResponse> => {
    refuseDeepJson(req.body);
    const cache = viewOf(await holder.get(), auth.role);
    // The same read again (a client polling its list): parse, plan and SQL are done already.
    const key = readKey(ctx, req, auth);
    const cached = key === undefined ? undefined : compiledReadsOf(cache).get(key);
    const plan = cached ?? planned(req, auth, cache, ctx.config, holder);
    if (plan.kind === 'inspect' && !describe) throw catalogue.invalidPath();
    if (key !== undefined && plan.kind === 'read' && !cached && keptCompiled(key, plan))
      compiledReadsOf(cache).set(key, plan);
    // Outside the plan: a cached read's plan serves requests with other headers.
    const request = httpContext(req);
    const setLocalClaims = cache.propagatesSetLocal === true;
    const caller = writingCaller(ctx.config, auth, changeLogOf(plan, auth, ctx.config));
    if (plan.idempotency)
      return idempotentWrite(
        ctx,
        { settings, mode: plan.tx, request, setLocalClaims, auth: caller },
        plan,
        plan.idempotency,
        limits,
      );
    // The settings and the plan's mode are passed as they are: every request makes these
    // options, and a copy of their members by spread ({ ...a, ...b, c }) takes V8's slow path.
    const { rows, timing, verified } = await runTransaction(
      ctx.db,
      { settings, mode: plan.tx, request, setLocalClaims, auth: caller },
      plan.statements,
      decision(plan),
    );
    try {
      const { status, headers, body } = respond(plan, rows, limits);
      return { status, headers, body, timing, verified };
    } catch (err) {
      throw err instanceof ApiError ? err.withTiming(timing) : err; // 416, a body too large: after the database
    }
  };
}

/**
 * The schema cache as a role sees it (SchemaCache.viewer: its errors name only what the role may
 * read), one per role and cache: a request asked for a copy of the whole cache each time. Only
 * the schema and the role's name are in it, nothing of a request or a workspace; a cache holds
 * at most VIEWS of them (roles are a deployment's few), any other role gets a copy of its own.
 */
const views = new WeakMap<SchemaCache, Map<string, SchemaCache>>();
const VIEWS = 64;
function viewOf(cache: SchemaCache, role: string): SchemaCache {
  let byRole = views.get(cache);
  if (!byRole) views.set(cache, (byRole = new Map()));
  let view = byRole.get(role);
  if (!view) {
    view = { ...cache, viewer: role };
    if (byRole.size < VIEWS) byRole.set(role, view);
  }
  return view;
}

/**
 * The caller of a transaction with a change log of its own (changeLogOf: it may write, for a
 * tenant), with the deployment's write claims (EngineConfig.writeClaims: the budgets its
 * workspace's log and keys are held to) and a fresh request id (the log names this request's
 * changes by it). Whatever the token's claims said under those names is replaced.
 */
function writingCaller(
  config: EngineContext['config'],
  auth: AuthContext,
  changes: EngineContext['config']['changes'],
): AuthContext {
  if (!changes) return auth;
  return { ...auth, claims: { ...auth.claims, ...config.writeClaims, [changes.requestClaim]: randomUUID() } };
}

/** The call's plan; a name it misses while the schema cache reloads is said to be maybe coming. */
function planned(
  req: GatewayRequest,
  auth: AuthContext,
  cache: SchemaCache,
  config: EngineContext['config'],
  holder: SchemaCacheHolder,
): ActionPlan {
  try {
    return actionPlan(req, auth, cache, config);
  } catch (err) {
    throw err instanceof ApiError && holder.isReloading() ? whileReloading(err) : err;
  }
}

/**
 * How the transaction ends: as the plan says, in the same round trip as its statements, unless
 * the plan checks what they answered first (max-affected, the singular media type).
 */
function decision({ check, end }: ActionPlan): Decide {
  if (check === undefined) return end;
  return (results) => {
    const affected = affectedRows(results, check.column);
    if (check.maxAffected !== undefined && affected > check.maxAffected) throw catalogue.maxAffected(affected);
    if (check.singular && affected !== 1) throw singularError(affected);
    return end;
  };
}

/** The answer a request stored with its key: what a repeat of it answers. */
type Stored = Pick<GatewayResponse, 'status' | 'headers' | 'body'>;

/**
 * A write sent with an Idempotency-Key (plan/action.ts): the key is claimed first; a repeat
 * answers what the first request stored, with nothing of its own run, and a different request
 * with the key is a 422; a first request writes, and its response is saved in its transaction
 * before COMMIT. A response that fails (a check, a body too large) saves nothing and commits
 * nothing, so a retry runs anew.
 */
async function idempotentWrite(
  ctx: EngineContext,
  tx: TransactionOptions,
  plan: ActionPlan,
  key: Idempotency,
  limits: Parameters<typeof respond>[2],
): Promise<GatewayResponse> {
  const store = defined(ctx.config.idempotency, 'the idempotency store of a keyed plan');
  const checks = decision(plan);
  let response: Stored | undefined;
  const decide: Decide = (results) => {
    const end = typeof checks === 'function' ? checks(results) : checks;
    if (end !== 'commit') return end;
    response = keptAnswer(respond(plan, results, limits), store);
    return { last: saveStatement(store, key.key, response) };
  };
  const guard = { statement: key.claim, stop: (rows: Row[]) => storedAnswer(rows, key) };
  const { timing, verified, stopped } = await runTransaction<Stored | ApiError>(
    ctx.db,
    tx,
    plan.statements,
    decide,
    guard,
  );
  if (stopped instanceof ApiError) throw stopped.withTiming(timing);
  const { status, headers, body } = stopped ?? defined(response, 'the response of a committed write');
  return { status, headers, body, timing, verified };
}

/**
 * The answer a key is to keep, within the store's bound (IdempotencyStore.maxAnswerBytes): a
 * larger one is refused, and the write with it (thrown while deciding: rolled back).
 */
function keptAnswer(answer: Stored, store: IdempotencyStore): Stored {
  if (store.maxAnswerBytes === undefined) return answer;
  const bytes = Buffer.byteLength(JSON.stringify(answer.headers)) + Buffer.byteLength(answer.body ?? '');
  if (bytes > store.maxAnswerBytes) throw catalogue.keptAnswerTooLarge(bytes, store.maxAnswerBytes);
  return answer;
}

/** The claim's row: undefined when this request claimed the key, else the stored answer, or a 422 when the key was another request's. */
function storedAnswer(rows: Row[], key: Idempotency): Stored | ApiError | undefined {
  const row = defined(rows[0], "the claim of an idempotency key's row");
  if (row.claimed === true || row.claimed === 't') return undefined;
  if (row.stored_fingerprint !== key.fingerprint) return catalogue.idempotencyKeyReused(key.key);
  // The claim and the save are one transaction: a key another request holds is waited for
  // (its row lock), so a committed key without an answer is a bug, not a client's error.
  const status = defined(
    row.stored_status ?? undefined,
    `the stored status of the committed key ${JSON.stringify(key.key)}`,
  );
  const headers = JSON.parse(String(row.stored_headers ?? '{}')) as Record<string, string>;
  return {
    status: Number(status),
    // Stripe's header: this is the answer of an earlier request, and nothing was written now.
    headers: { ...headers, 'Idempotent-Replayed': 'true' },
    body: typeof row.stored_body === 'string' ? row.stored_body : undefined,
  };
}
