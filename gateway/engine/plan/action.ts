// The action plan (PostgREST's ActionPlan): everything one gateway call will do, decided before
// anything runs. One pure function, actionPlan(), makes it from the request, its caller, the
// schema cache and the configuration: which action (a read, a write, a call, an EXPLAIN of one
// of them, or the description of a schema), the compiled statements, the transaction they run
// in and how it ends, and what the response will say of the preferences it applied. The gateway
// call (run.ts) runs any plan the same way, and the unit tier plans through this very function.

import { createHash } from 'node:crypto';
import type { AuthContext, GatewayRequest } from '../call.js';
import type { EngineConfig } from '../config.js';
import { catalogue, INVALID_JSON } from '../errors/catalogue.js';
import type { TransactionMode } from '../execute.js';
import { defined } from '../invariant.js';
import { readStatement, type ReadBounds, type Statement } from '../query/read.js';
import { routineSource, scalarStatement } from '../query/routine.js';
import { writeStatement, type ReturnShape } from '../query/write.js';
import { explainStatement } from '../query/explain.js';
import { claimStatement } from '../query/idempotency.js';
import { inspectStatements } from '../query/inspect.js';
import { RESPONSE_SETTINGS, readsResponseSettings, responseSettingsAfter } from '../query/settings.js';
import { checkEmbedDepth, checkSelectWidth } from '../request/limits.js';
import { isFilterValue } from '../operators.js';
import { parseApiRequest, routineName } from '../request/parse.js';
import { isReservedKey, type ApiRequest, type Output, type PlanMedia, type Preferences } from '../request/types.js';
import type { Relation, Routine, SchemaCache } from '../schema-cache/types.js';
import { AliasCounter, findRelation, readPlan } from './read.js';
import { argumentKeys, findRoutines, routineNotFound, routinePlan } from './routine.js';
import { bodyRows, checkPut, deletePlan, insertPlan, putKey, updatePlan, type MutationPlan } from './write.js';
import type { ReadNode, RoutineCall } from './types.js';

/** What a plan's transaction checks of its results before it ends (anything thrown rolls it back). */
interface AffectedCheck {
  /** The result column that counts the rows the statement changed or returned. */
  column: 'total_result_set' | 'page_total';
  /** Prefer: handling=strict, max-affected=n. */
  maxAffected?: number;
  /** The object media type of a write: exactly one row, or nothing it did stays. */
  singular?: boolean;
}

interface Base {
  /** READ ONLY or READ WRITE, and the search_path's schema. */
  tx: TransactionMode;
  /** The statements, in order, each with its parameters numbered. */
  statements: Statement[];
  /** How the transaction ends when every statement succeeded (and `check` passed). */
  end: 'commit' | 'rollback';
  check?: AffectedCheck;
  /** A create sent with an Idempotency-Key (see idempotencyOf). */
  idempotency?: Idempotency;
  /** The schema the answer names in Content-Profile: only when several are exposed, as PostgREST. */
  profile?: string;
}

/**
 * A POST sent with an Idempotency-Key: `claim` runs first in the transaction, alone; when the
 * key was used before, the plan's statements do not run and the stored answer is the response
 * (or a 422 when the fingerprint differs); otherwise the response is saved before COMMIT, so a
 * key is kept exactly when its write is (run.ts).
 */
export interface Idempotency {
  key: string;
  /** A digest of the request (method, schema, path, query, the headers that shape it, body). */
  fingerprint: string;
  claim: Statement;
}

/** GET/HEAD of a table or view. */
export interface ReadAction extends Base {
  kind: 'read';
  api: ApiRequest;
  read: ReadNode;
  /** The Preference-Applied header. */
  applied: string | undefined;
}

/** POST, PUT, PATCH or DELETE of a table or view. */
export interface WriteAction extends Base {
  kind: 'write';
  api: ApiRequest;
  relation: Relation;
  /** The rows the write returns, shaped as a read of them is. */
  read: ReadNode;
  mutation: MutationPlan;
  shape: ReturnShape;
  /** An upsert whose resolution applies (the table has a conflict target). */
  resolved: boolean;
  applied: string | undefined;
}

/** /rpc/{function}. */
export interface CallAction extends Base {
  kind: 'call';
  api: ApiRequest;
  call: RoutineCall;
  /** The read of a table-typed function's rows. */
  read?: ReadNode;
  applied: string | undefined;
}

/** Accept: application/vnd.pgrst.plan: EXPLAIN of the statement of `of`, always rolled back. */
export interface ExplainAction extends Base {
  kind: 'explain';
  of: ReadAction | WriteAction | CallAction;
  media: PlanMedia;
}

/** GET of the root: the relations and functions of a schema, with what the caller's role may do with them. */
export interface InspectAction extends Base {
  kind: 'inspect';
  schema: string;
  relations: Relation[];
  routines: Routine[];
  /** The client's Accept, for the deployment's description (GatewayOptions.describe). */
  accept: string | undefined;
}

export type ActionPlan = ReadAction | WriteAction | CallAction | ExplainAction | InspectAction;

/** What planning reads of the configuration. */
export type PlanConfig = Pick<
  EngineConfig,
  | 'schemas'
  | 'maxEmbedDepth'
  | 'maxSelectWidth'
  | 'aggregatesEnabled'
  | 'planEnabled'
  | 'maxBodyBytes'
  | 'tenantClaim'
  | 'tenantColumn'
  | 'idempotency'
  | 'changes'
> & {
  /** Bytes of one read's body (query/read.ts, ReadBounds); undefined: unbounded. */
  maxResponseBytes?: number;
};

/** The exposed schema a request addresses: explicit, or by Accept-Profile/Content-Profile. */
function requestSchema(config: Pick<EngineConfig, 'schemas'>, req: GatewayRequest): string {
  const read = req.method === 'GET' || req.method === 'HEAD';
  const asked = req.schema ?? (read ? req.headers['accept-profile'] : req.headers['content-profile']);
  const schemas = config.schemas;
  if (asked === undefined || asked === '') return defined(schemas[0], 'the default exposed schema');
  if (!schemas.includes(asked)) {
    throw catalogue.schemaNotExposed(
      schemas,
      `Use ${read ? 'Accept-Profile' : 'Content-Profile'} with an exposed schema`,
    );
  }
  return asked;
}

/**
 * The tenant filter of a caller (EngineConfig.tenantColumn compared with its tenantClaim): only
 * for one whose claims name a tenant.
 */
export function tenantOf(config: PlanConfig, auth: AuthContext): { column: string; claim: string } | undefined {
  const { tenantColumn: column, tenantClaim: claim } = config;
  const value = auth.claims[claim];
  return column !== undefined && value !== undefined && value !== null ? { column, claim } : undefined;
}

/**
 * The plan of one gateway call. `cache` is the schema cache as the caller's role sees it
 * (`viewer`). Pure: no I/O; anything the request gets wrong is thrown as its ApiError.
 */
export function actionPlan(req: GatewayRequest, auth: AuthContext, cache: SchemaCache, config: PlanConfig): ActionPlan {
  const schema = requestSchema(config, req);
  const planned = withSettings(plannedAction(req, auth, cache, config, schema), auth, config);
  return config.schemas.length > 1 ? { ...planned, profile: schema } : planned;
}

/**
 * A read, write or call reads the response settings its SQL made, last (query/settings.ts); one
 * that may write runs the deployment's report of its changes first, in the same statement.
 */
function withSettings(plan: ActionPlan, auth: AuthContext, config: PlanConfig): ActionPlan {
  if (!readsResponseSettings(plan)) return plan;
  const changes = changeLogOf(plan, auth, config);
  const settings = changes ? responseSettingsAfter(changes.report) : RESPONSE_SETTINGS;
  return { ...plan, statements: [...plan.statements, settings] };
}

/**
 * The deployment's change log (EngineConfig.changes) as it applies to this call: to a
 * transaction that may write, of a caller whose claims name a tenant. A caller of no tenant
 * has no log of its own, and its role need not reach the report's schema (the roles of another
 * schema served beside the app's do not).
 */
export function changeLogOf(
  plan: Pick<ActionPlan, 'tx'>,
  auth: AuthContext,
  config: Pick<PlanConfig, 'changes' | 'tenantClaim'>,
): PlanConfig['changes'] {
  const tenant = auth.claims[config.tenantClaim];
  return !plan.tx.readOnly && tenant !== undefined && tenant !== null ? config.changes : undefined;
}

function plannedAction(
  req: GatewayRequest,
  auth: AuthContext,
  cache: SchemaCache,
  config: PlanConfig,
  schema: string,
): ActionPlan {
  const key = idempotencyKey(req, config);
  // The root of the API describes the schema (PostgREST's OpenAPI), in the caller's transaction.
  if (req.relation === '' && (req.method === 'GET' || req.method === 'HEAD')) return inspectPlan(req, cache, schema);
  const api = parseRequest(req, cache, config, schema);
  const fn = routineName(req.relation);
  const write = api.method !== 'GET' && api.method !== 'HEAD';
  const tx: TransactionMode = { schema, readOnly: !write, write };
  const action =
    fn !== undefined
      ? callPlan(req, auth, cache, config, api, tx)
      : write
        ? writePlan(req, auth, cache, config, api, tx)
        : readAction(auth, cache, config, api, tx);
  if (api.plan) return explainPlan(action, api.plan);
  return key === undefined ? action : idempotent(action, req, auth, config, schema, key);
}

/** Visible ASCII, no space: what an Idempotency-Key may be made of (Stripe's and the IETF draft's keys fit). */
const KEY = /^[\x21-\x7e]{1,255}$/;

/** The Idempotency-Key of a POST, checked, where the deployment keeps keys; else undefined. */
function idempotencyKey(req: GatewayRequest, config: PlanConfig): string | undefined {
  const key = req.headers['idempotency-key'];
  if (key === undefined || req.method !== 'POST' || config.idempotency === undefined) return undefined;
  if (!KEY.test(key)) throw catalogue.idempotencyKey();
  return key;
}

/**
 * The plan with its key, when a key can make it idempotent: a write or a call that writes,
 * ends in COMMIT, and is made by a caller of a tenant (keys are kept per tenant). Any other
 * POST (a read-only function, Prefer: tx=rollback) writes nothing to repeat and runs as it is.
 */
function idempotent(
  action: ActionPlan,
  req: GatewayRequest,
  auth: AuthContext,
  config: PlanConfig,
  schema: string,
  key: string,
): ActionPlan {
  const store = config.idempotency;
  if (store === undefined || (action.kind !== 'write' && action.kind !== 'call')) return action;
  if (action.tx.readOnly || action.end !== 'commit' || tenantOf(config, auth) === undefined) return action;
  const fingerprint = fingerprintOf(req, schema);
  return { ...action, idempotency: { key, fingerprint, claim: claimStatement(store, key, fingerprint) } };
}

/** What makes two requests the same request: everything the plan is made of but the caller. */
function fingerprintOf(req: GatewayRequest, schema: string): string {
  const h = req.headers;
  const body = req.body === undefined ? '' : typeof req.body === 'string' ? req.body : JSON.stringify(req.body);
  const parts = [req.method, schema, req.relation, req.query.toString(), h.prefer, h.accept, h['content-type'], body];
  return createHash('sha256')
    .update(JSON.stringify(parts.map((p) => p ?? '')))
    .digest('base64url');
}

/**
 * The request read into an ApiRequest (request/parse.ts) and its select checked against the
 * limits. GET /rpc arguments are the query keys named like one of the function's parameters, so
 * the cache is asked before the query is parsed; a function that is not there is PGRST202.
 */
export function parseRequest(
  req: GatewayRequest,
  cache: SchemaCache,
  config: PlanConfig,
  schema = requestSchema(config, req),
): ApiRequest {
  // relation 'rpc/{name}' calls a function (call.ts).
  const fn = routineName(req.relation);
  let isArgument: ((key: string, value: string) => boolean) | undefined;
  if (fn !== undefined) {
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'POST') {
      throw catalogue.rpcMethod(req.method);
    }
    // As PostgREST: a parameter is an argument unless it is reserved, names an embed's path
    // (`tasks.id=…`) or its value reads as a filter on the rows (`id=gt.2`).
    if (req.method !== 'POST')
      isArgument = (key, value) => !isReservedKey(key) && !key.includes('.') && !isFilterValue(value);
    if (findRoutines(cache, schema, fn).length === 0) {
      throw routineNotFound(
        cache,
        schema,
        fn,
        req.method === 'POST'
          ? argumentKeys({ method: 'POST' } as ApiRequest, req.body, req.headers['content-type'])
          : [...new Set([...req.query].filter(([k, v]) => isArgument?.(k, v)).map(([k]) => k))],
        { post: req.method === 'POST', contentType: req.headers['content-type'] },
      );
    }
  }
  const api = parseApiRequest(req, schema, isArgument);
  checkSelectWidth(api.select, config);
  if (api.plan && !config.planEnabled) {
    throw catalogue.notAcceptable(req.headers.accept, 'Query plans are off on this server (TALLY_DB_PLAN_ENABLED)');
  }
  return api;
}

/** The read plan of `relation` for the request's select and embeds (a write's or a call's return too). */
function planOf(
  cache: SchemaCache,
  config: PlanConfig,
  relation: Relation,
  api: ApiRequest,
  auth: AuthContext,
  range = api.range,
): ReadNode {
  const root = readPlan({
    cache,
    relation,
    select: api.select,
    nodes: api.nodes,
    range,
    aliases: new AliasCounter(),
    aggregatesEnabled: config.aggregatesEnabled,
    tenant: tenantOf(config, auth),
  });
  checkEmbedDepth(api.select, config);
  return root;
}

/** How the request's rows are written out: its media type and nulls=stripped. */
const outputOf = (api: ApiRequest): Output => ({ media: api.accept, stripNulls: api.stripNulls });

/** The bounds of a read; a query plan shows the request's own query, as PostgREST's does, without them. */
const readBounds = (config: PlanConfig, api: ApiRequest): ReadBounds =>
  api.plan ? {} : { maxResponseBytes: config.maxResponseBytes };

/** The statements of a read and its planned count's EXPLAIN, in the order they run. */
const inOrder = (s: { main: Statement; explain?: Statement }): Statement[] =>
  s.explain ? [s.main, s.explain] : [s.main];

function readAction(
  auth: AuthContext,
  cache: SchemaCache,
  config: PlanConfig,
  api: ApiRequest,
  tx: TransactionMode,
): ReadAction {
  const relation = findRelation(cache, api.schema, api.relation);
  const read = planOf(cache, config, relation, api, auth);
  const statements = readStatement(read, outputOf(api), api.preferences.count, undefined, readBounds(config, api));
  return {
    kind: 'read',
    api,
    read,
    tx,
    statements: inOrder(statements),
    end: 'commit',
    applied: preferenceApplied(api.preferences, 'GET'),
  };
}

/**
 * /rpc/{function}: READ ONLY over GET and for STABLE/IMMUTABLE functions over POST, READ WRITE
 * for VOLATILE ones over POST (Prefer: tx=rollback honoured), in the request's transaction
 * model. Rows of a table-typed function are read like a table's; scalars are one JSON value.
 */
function callPlan(
  req: GatewayRequest,
  auth: AuthContext,
  cache: SchemaCache,
  config: PlanConfig,
  api: ApiRequest,
  tx: TransactionMode,
): CallAction {
  const call = routinePlan(cache, api, req.body, req.headers['content-type']);
  const returns = call.routine.returns;
  let read: ReadNode | undefined;
  let statements: Statement[];
  if (returns.kind === 'composite') {
    read = planOf(cache, config, returns.relation!, api, auth);
    statements = inOrder(
      readStatement(
        read,
        outputOf(api),
        api.preferences.count,
        routineSource(call, read.alias),
        readBounds(config, api),
      ),
    );
  } else statements = [scalarStatement(call, readBounds(config, api))];
  const prefs = api.preferences;
  // handling=strict, max-affected=n: a function that wrote returns at most n rows, or nothing
  // it did stays; the same for the object media type and its one row.
  const max = prefs.handling === 'strict' ? prefs.maxAffected : undefined;
  const singular = api.accept === 'object' && read !== undefined;
  return {
    kind: 'call',
    api,
    call,
    read,
    tx: { ...tx, readOnly: call.readOnly, write: !call.readOnly },
    statements,
    end: call.readOnly || prefs.tx !== 'rollback' ? 'commit' : 'rollback',
    check:
      call.readOnly || (max === undefined && !singular)
        ? undefined
        : { column: 'page_total', maxAffected: max, singular },
    applied: preferenceApplied(call.readOnly ? { ...prefs, tx: undefined } : prefs, 'RPC'),
  };
}

function writePlan(
  req: GatewayRequest,
  auth: AuthContext,
  cache: SchemaCache,
  config: PlanConfig,
  api: ApiRequest,
  tx: TransactionMode,
): WriteAction {
  const relation = findRelation(cache, api.schema, api.relation);
  const key = api.method === 'PUT' ? putKey(api, relation) : undefined;
  const read = planOf(cache, config, relation, api, auth, {
    offset: api.nodes.get('')?.offset ?? 0,
    limit: api.nodes.get('')?.limit,
  });
  const prefs = api.preferences;
  let mutation: MutationPlan;
  if (api.method === 'DELETE') mutation = deletePlan(relation, read);
  else {
    if (req.body === undefined) throw catalogue.invalidBody(INVALID_JSON);
    const size =
      typeof req.body === 'string' ? Buffer.byteLength(req.body) : Buffer.byteLength(JSON.stringify(req.body) ?? '');
    if (size > config.maxBodyBytes) {
      throw catalogue.bodyTooLarge(config.maxBodyBytes);
    }
    const body = bodyRows(req.body, req.headers['content-type']);
    if (api.method === 'PATCH') mutation = updatePlan(api, relation, body, read, cache.viewer);
    else mutation = insertPlan(api, relation, key ? checkPut(api, relation, body, key) : body, cache.viewer);
  }
  const shape: ReturnShape = prefs.return ?? 'minimal';
  const strict =
    prefs.handling === 'strict' && prefs.maxAffected !== undefined && api.method !== 'POST' && api.method !== 'PUT';
  // Only a strict max-affected and the object media type look at the result before the
  // transaction ends; any other write ends in the same round trip as its statement. The object
  // media type asks for exactly one row, returned or not (PostgREST 12): otherwise 406 and
  // nothing is changed.
  const check: AffectedCheck | undefined =
    strict || api.accept === 'object'
      ? {
          column: 'total_result_set',
          maxAffected: strict ? prefs.maxAffected : undefined,
          singular: api.accept === 'object',
        }
      : undefined;
  const resolved = mutation.kind === 'insert' && mutation.onConflict !== undefined && api.method === 'POST';
  return {
    kind: 'write',
    api,
    relation,
    read,
    mutation,
    shape,
    resolved,
    tx,
    statements: [writeStatement(mutation, read, shape, outputOf(api), readBounds(config, api))],
    end: prefs.tx === 'rollback' ? 'rollback' : 'commit',
    check,
    applied: preferenceApplied(prefs, api.method, resolved),
  };
}

/**
 * EXPLAIN of the very statement the request would run, in its transaction (role, claims,
 * pre-request), always rolled back, so EXPLAIN ANALYZE of a write or a VOLATILE function
 * changes nothing.
 */
function explainPlan(of: ReadAction | WriteAction | CallAction, media: PlanMedia): ExplainAction {
  return {
    kind: 'explain',
    of,
    media,
    tx: of.tx,
    statements: [explainStatement(defined(of.statements[0], 'the statement to explain'), media)],
    end: 'rollback',
  };
}

function inspectPlan(req: GatewayRequest, cache: SchemaCache, schema: string): InspectAction {
  const relations = [...cache.relations.values()]
    .filter((r) => r.schema === schema && r.kind !== 'composite')
    .sort((a, b) => a.name.localeCompare(b.name));
  const routines = [...cache.routines.values()].flat().filter((r) => r.schema === schema);
  return {
    kind: 'inspect',
    schema,
    relations,
    routines,
    accept: req.headers.accept,
    tx: { schema, readOnly: true, write: false },
    statements: inspectStatements(relations, routines),
    end: 'commit',
  };
}

/** Which preferences each kind of request applies (and echoes), as PostgREST's responses do. */
const APPLIES: Record<string, ReadonlySet<string>> = {
  GET: new Set(['count']),
  HEAD: new Set(['count']),
  POST: new Set(['resolution', 'missing', 'return', 'count', 'tx', 'handling']),
  PUT: new Set(['return', 'count', 'tx', 'handling']),
  PATCH: new Set(['missing', 'return', 'count', 'tx', 'handling', 'max-affected']),
  DELETE: new Set(['return', 'count', 'tx', 'handling', 'max-affected']),
  RPC: new Set(['count', 'tx', 'handling', 'max-affected']),
};

/**
 * The Preference-Applied header of a request (`kind`: its method, or RPC), in PostgREST's
 * order; the one place it is made. `resolved`: the resolution was applied (the table has a
 * conflict target).
 */
function preferenceApplied(prefs: Preferences, kind: string, resolved = false): string | undefined {
  const applies = APPLIES[kind] ?? new Set<string>();
  const out: string[] = [];
  const add = (name: string, value: string | number | undefined) => {
    if (value !== undefined && applies.has(name)) out.push(`${name}=${value}`);
  };
  if (resolved) add('resolution', prefs.resolution);
  add('missing', prefs.missing);
  add('return', prefs.return);
  add('count', prefs.count);
  add('tx', prefs.tx);
  add('handling', prefs.handling);
  if (prefs.handling === 'strict') add('max-affected', prefs.maxAffected);
  return out.length > 0 ? out.join(', ') : undefined;
}
