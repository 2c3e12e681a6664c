// The gateway call (the one internal interface, see call.ts): parse → plan → query → execute →
// response. It knows no table by name; everything comes from the schema cache.

import type { Row } from 'postgres';
import type { AuthContext, GatewayCall, GatewayRequest, GatewayResponse } from './call.js';
import type { EngineContext } from './config.js';
import { catalogue, INVALID_JSON, type DescribeConstraint } from './errors.js';
import { join, prefixed, sql, type Fragment } from './sql.js';
import { runTransaction, type TransactionOptions } from './execute.js';
import { AliasCounter, findRelation, readPlan } from './plan/read.js';
import { argumentKeys, findRoutines, routineNotFound, routinePlan } from './plan/routine.js';
import { bodyRows, checkPut, deletePlan, insertPlan, updatePlan } from './plan/write.js';
import {
  ESTIMATE_THRESHOLD,
  readStatement,
  type ReadBounds,
  type ReadStatements,
  type Statement,
} from './query/read.js';
import { routineSource, scalarStatement } from './query/routine.js';
import { writeStatement, type ReturnShape } from './query/write.js';
import { checkSelectLimits } from './request/limits.js';
import { parseApiRequest, refuseDeepJson, routineName } from './request/parse.js';
import type { ApiRequest, PlanMedia, PlanOption } from './request/types.js';
import { CONTENT_TYPES, contentRange, preferenceApplied, readResponse, singularError } from './response/index.js';
import { ChangeWatch } from './changes.js';
import { SchemaCacheHolder } from './schema-cache/index.js';
import type { Relation, SchemaCache } from './schema-cache/types.js';
import { Lru } from './lru.js';
import { defined } from './invariant.js';

const holders = new WeakMap<EngineContext, SchemaCacheHolder>();
const watches = new WeakMap<EngineContext, ChangeWatch>();

/** The database changes a server context watches: one watch per context, for every cache of it. */
export function changesOf(ctx: EngineContext): ChangeWatch {
  let w = watches.get(ctx);
  if (!w) watches.set(ctx, (w = new ChangeWatch(ctx.db.control)));
  return w;
}

/** The schema cache of a server context: one per context, shared by every surface. */
export function schemaCacheOf(ctx: EngineContext): SchemaCacheHolder {
  let h = holders.get(ctx);
  if (!h) holders.set(ctx, (h = new SchemaCacheHolder(ctx.db.control, ctx.config.schemas, changesOf(ctx))));
  return h;
}

/** The exposed schema a request addresses: explicit, or by Accept-Profile/Content-Profile. */
export function requestSchema(ctx: EngineContext, req: GatewayRequest): string {
  const read = req.method === 'GET' || req.method === 'HEAD';
  const asked = req.schema ?? (read ? req.headers['accept-profile'] : req.headers['content-profile']);
  const schemas = ctx.config.schemas;
  if (asked === undefined || asked === '') return defined(schemas[0], 'the default exposed schema');
  if (!schemas.includes(asked)) {
    throw catalogue.schemaNotExposed(
      schemas,
      `Use ${read ? 'Accept-Profile' : 'Content-Profile'} with an exposed schema`,
    );
  }
  return asked;
}

/** A table read, parsed, planned and compiled: all of it depends only on the read's key. */
interface CompiledRead {
  api: ApiRequest;
  statements: ReadStatements;
}

/** Compiled reads kept per schema cache: a reload starts afresh, so no plan outlives its schema. */
const COMPILED_READS = 1000;
const compiledReads = new WeakMap<SchemaCache['relations'], Lru<string, CompiledRead>>();

/** Keyed by the loaded cache's relations, which every request's view of that cache shares. */
function compiledReadsOf(cache: SchemaCache): Lru<string, CompiledRead> {
  let lru = compiledReads.get(cache.relations);
  if (!lru) compiledReads.set(cache.relations, (lru = new Lru(COMPILED_READS)));
  return lru;
}

/**
 * What a table read's statement depends on: relation, query string, role, and the headers the
 * parser reads (schema profile, Accept, Prefer, Range). Reads of a function are not cached (their
 * arguments are query keys); nor is anything else but GET and HEAD.
 */
function readKey(ctx: EngineContext, req: GatewayRequest, auth: AuthContext): string | undefined {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || routineName(req.relation) !== undefined) return undefined;
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
    tenantOf(ctx, auth) ? 't' : '',
  ].join('\0');
}

function readOptions(
  ctx: EngineContext,
  auth: AuthContext,
  options: GatewayOptions,
  schema: string,
): TransactionOptions {
  return {
    schema,
    describeConstraint: options.describeConstraint,
    readOnly: true,
    auth,
    anonRole: ctx.config.anonRole,
    readOnlyRoles: ctx.config.readOnlyRoles,
    preRequest: ctx.config.preRequest,
    statementTimeoutMs: ctx.config.statementTimeoutMs,
    tenantClaim: ctx.config.tenantClaim,
    workMem: ctx.config.workMem,
    write: false,
  };
}

/**
 * The tenant filter of a caller (EngineConfig.tenantColumn compared with its tenantClaim): only
 * for one whose claims name a tenant.
 */
function tenantOf(ctx: EngineContext, auth: AuthContext): { column: string; claim: string } | undefined {
  const { tenantColumn: column, tenantClaim: claim } = ctx.config;
  const value = auth.claims[claim];
  return column !== undefined && value !== undefined && value !== null ? { column, claim } : undefined;
}

/** What a deployment adds to the engine's behaviour. */
export interface GatewayOptions {
  /** One sentence for a constraint or data error (naming the field), the same on every surface. */
  describeConstraint?: DescribeConstraint;
}

export function createGateway(ctx: EngineContext, options: GatewayOptions = {}): GatewayCall {
  const holder = schemaCacheOf(ctx);
  return async (req: GatewayRequest, auth: AuthContext): Promise<GatewayResponse> => {
    refuseDeepJson(req.body);
    const cache: SchemaCache = { ...(await holder.get()), viewer: auth.role };
    // The same read again (a client polling its list): parse, plan and SQL are done already.
    const key = readKey(ctx, req, auth);
    const compiled = key === undefined ? undefined : compiledReadsOf(cache).get(key);
    if (compiled) return executeRead(ctx, compiled, readOptions(ctx, auth, options, compiled.api.schema));
    const schema = requestSchema(ctx, req);
    // relation 'rpc/{name}' calls a function (call.ts). Over GET its arguments are the query keys
    // named like one of its parameters, so the cache is asked before the query is parsed.
    const fn = routineName(req.relation);
    let isArgument: ((key: string) => boolean) | undefined;
    if (fn !== undefined) {
      if (req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'POST') {
        throw catalogue.rpcMethod(req.method);
      }
      const overloads = findRoutines(cache, schema, fn);
      const names = new Set(overloads.flatMap((r) => r.params.map((p) => p.name)).filter((n) => n !== ''));
      if (overloads.length === 0) {
        throw routineNotFound(
          cache,
          schema,
          fn,
          req.method === 'POST'
            ? argumentKeys({ method: 'POST' } as ApiRequest, req.body, req.headers['content-type'])
            : [...new Set(req.query.keys())].filter(
                (k) => !['select', 'order', 'limit', 'offset', 'and', 'or', 'apikey'].includes(k),
              ),
        );
      }
      if (req.method !== 'POST') isArgument = (key) => names.has(key);
    }
    const api = parseApiRequest(req, schema, isArgument);
    checkSelectLimits(api.select, ctx.config);
    if (api.plan && !ctx.config.planEnabled) {
      throw catalogue.notAcceptable(req.headers.accept, 'Query plans are off on this server (TALLY_DB_PLAN_ENABLED)');
    }
    const write = api.method !== 'GET' && api.method !== 'HEAD';
    const tx: TransactionOptions = {
      schema,
      describeConstraint: options.describeConstraint,
      readOnly: !write,
      auth,
      anonRole: ctx.config.anonRole,
      readOnlyRoles: ctx.config.readOnlyRoles,
      preRequest: ctx.config.preRequest,
      statementTimeoutMs: ctx.config.statementTimeoutMs,
      tenantClaim: ctx.config.tenantClaim,
      workMem: ctx.config.workMem,
      write,
    };
    if (fn !== undefined) return runRoutine(ctx, cache, api, req, tx);
    return write ? runWrite(ctx, cache, api, req, tx) : runRead(ctx, cache, api, tx, key);
  };
}

/** The read plan of `relation` for the request's select and embeds (a write's or a call's return too). */
function planOf(
  ctx: EngineContext,
  cache: SchemaCache,
  relation: Relation,
  api: ApiRequest,
  auth: AuthContext,
  range = api.range,
) {
  return readPlan({
    cache,
    relation,
    select: api.select,
    nodes: api.nodes,
    range,
    aliases: new AliasCounter(),
    aggregatesEnabled: ctx.config.aggregatesEnabled,
    tenant: tenantOf(ctx, auth),
  });
}

async function runRead(
  ctx: EngineContext,
  cache: SchemaCache,
  api: ApiRequest,
  tx: TransactionOptions,
  key: string | undefined,
): Promise<GatewayResponse> {
  const relation = findRelation(cache, api.schema, api.relation);
  const root = planOf(ctx, cache, relation, api, tx.auth);
  const count = api.preferences.count;
  const statements = readStatement(root, api.accept, count, undefined, readBounds(ctx, api));
  if (api.plan) return planResponse(ctx, tx, statements.main, api.plan);
  const compiled = { api, statements };
  if (key !== undefined) compiledReadsOf(cache).set(key, compiled);
  return executeRead(ctx, compiled, tx);
}

/** The bounds of a read; a query plan shows the request's own query, as PostgREST's does, without them. */
const readBounds = (ctx: EngineContext, api: ApiRequest): ReadBounds =>
  api.plan ? {} : { maxResponseBytes: ctx.config.maxResponseBytes };

async function executeRead(
  ctx: EngineContext,
  { api, statements }: CompiledRead,
  tx: TransactionOptions,
): Promise<GatewayResponse> {
  const results = await runTransaction(
    ctx.db,
    tx,
    statements.explain ? [statements.main, statements.explain] : [statements.main],
  );
  return readResult(ctx, api, results);
}

/** The response of a read statement (and its EXPLAIN for planned counts), as PostgREST shapes it. */
function readResult(
  ctx: EngineContext,
  api: ApiRequest,
  results: Row[][],
  extraHeaders: Record<string, string> = {},
): GatewayResponse {
  const count = api.preferences.count;
  const row = firstRow(results);
  if (row.body === null && row.body_bytes != null) {
    throw catalogue.responseTooLarge(Number(row.body_bytes), ctx.config.maxResponseBytes);
  }
  let total: number | undefined;
  if (count === 'exact') total = Number(row.total_result_set);
  // Without an EXPLAIN (a tenant's read: query/read.ts) the count is exact.
  else if ((count === 'planned' || count === 'estimated') && results[1] === undefined)
    total = Number(row.total_result_set);
  else if (count === 'planned' || count === 'estimated') {
    const planned = plannedRows(results[1]);
    const exact = count === 'estimated' ? Number(row.total_result_set) : undefined;
    total = exact !== undefined && exact <= ESTIMATE_THRESHOLD ? exact : planned;
  }
  const res = readResponse(
    { total, pageTotal: row.page_total as number, body: row.body as string },
    api.range.offset,
    api.accept,
    api.method === 'HEAD',
    api.preferences,
  );
  Object.assign(res.headers, extraHeaders);
  return res;
}

/**
 * /rpc/{function}: READ ONLY over GET and for STABLE/IMMUTABLE functions over POST, READ WRITE
 * for VOLATILE ones over POST (Prefer: tx=rollback honoured), in the request's transaction
 * model. Rows of a table-typed function are read like a table's; scalars are one JSON value.
 */
async function runRoutine(
  ctx: EngineContext,
  cache: SchemaCache,
  api: ApiRequest,
  req: GatewayRequest,
  tx: TransactionOptions,
): Promise<GatewayResponse> {
  const call = routinePlan(cache, api, req.body, req.headers['content-type']);
  const returns = call.routine.returns;
  const rtx: TransactionOptions = { ...tx, readOnly: call.readOnly, write: !call.readOnly };
  let statements: ReadStatements;
  if (returns.kind === 'composite') {
    const root = planOf(ctx, cache, returns.relation!, api, tx.auth);
    statements = readStatement(
      root,
      api.accept,
      api.preferences.count,
      routineSource(call, root.alias),
      readBounds(ctx, api),
    );
  } else statements = { main: scalarStatement(call) };
  if (api.plan) return planResponse(ctx, rtx, statements.main, api.plan);
  const prefs = api.preferences;
  const end = prefs.tx === 'rollback' ? 'rollback' : 'commit';
  // handling=strict, max-affected=n: a function that wrote returns at most n rows, or nothing
  // it did stays.
  const max = prefs.handling === 'strict' ? prefs.maxAffected : undefined;
  const decide = call.readOnly
    ? undefined
    : max === undefined
      ? end
      : (res: Row[][]) => {
          const affected = Number(firstRow(res).page_total);
          if (affected > max) throw catalogue.maxAffected(affected);
          return end;
        };
  const results = await runTransaction(
    ctx.db,
    rtx,
    statements.explain ? [statements.main, statements.explain] : [statements.main],
    decide,
  );
  const preferences = preferenceApplied(call.readOnly ? { ...prefs, tx: undefined } : prefs, 'RPC');
  const applied: Record<string, string> = preferences ? { 'Preference-Applied': preferences } : {};
  if (returns.kind === 'void') return { status: 204, headers: applied, body: undefined };
  if (returns.kind === 'scalar') {
    // A scalar's rows (one, or a set's) are counted as a table's: Content-Range, count=exact.
    const row = firstRow(results);
    const rows = row.page_total as number;
    const counted = prefs.count === 'exact' || prefs.count === 'estimated' || prefs.count === 'planned';
    return {
      status: 200,
      headers: {
        'Content-Type': CONTENT_TYPES.json,
        'Content-Range': contentRange(0, rows, counted ? rows : undefined),
        ...applied,
      },
      body: api.method === 'HEAD' ? undefined : (row.body as string),
    };
  }
  return readResult(ctx, api, results, applied);
}

const EXPLAIN_FORMATS: Record<PlanMedia['format'], Fragment> = { json: sql`FORMAT JSON`, text: sql`FORMAT TEXT` };
const EXPLAIN_OPTIONS: Record<PlanOption, Fragment> = {
  analyze: sql`ANALYZE`,
  verbose: sql`VERBOSE`,
  settings: sql`SETTINGS`,
  buffers: sql`BUFFERS`,
  wal: sql`WAL`,
};

const MEDIA_NAMES: Record<PlanMedia['for'], string> = {
  json: 'application/json',
  object: 'application/vnd.pgrst.object+json',
  csv: 'text/csv',
};

/**
 * Accept: application/vnd.pgrst.plan: EXPLAIN of the very statement the request would run, in
 * its transaction (role, claims, pre-request), always rolled back, so EXPLAIN ANALYZE of a
 * write or a VOLATILE function changes nothing.
 */
async function planResponse(
  ctx: EngineContext,
  tx: TransactionOptions,
  statement: Statement,
  plan: PlanMedia,
): Promise<GatewayResponse> {
  const options = [EXPLAIN_FORMATS[plan.format], ...plan.options.map((o) => EXPLAIN_OPTIONS[o])];
  const results = await runTransaction(
    ctx.db,
    tx,
    [prefixed(sql`EXPLAIN (${join(options)}) `, statement)],
    () => 'rollback',
  );
  const rows = defined(results[0], 'the EXPLAIN rows');
  const json = plan.format === 'json' ? firstRow(results)['QUERY PLAN'] : undefined;
  const body =
    plan.format === 'json'
      ? typeof json === 'string'
        ? json
        : JSON.stringify(json)
      : rows.map((r) => r['QUERY PLAN'] as string).join('\n');
  const type = `application/vnd.pgrst.plan+${plan.format}; for="${MEDIA_NAMES[plan.for]}"${plan.options.length ? `; options=${plan.options.join('|')}` : ''}; charset=utf-8`;
  return { status: 200, headers: { 'Content-Type': type }, body };
}

/**
 * The first row of the first statement: every engine statement answers exactly one row (its body
 * is one json_agg), so a missing one is a bug.
 */
function firstRow(results: Row[][]): Row {
  return defined(results[0]?.[0], "the statement's row");
}

function plannedRows(rows: Row[] | undefined): number | undefined {
  const plan = rows?.[0]?.['QUERY PLAN'] as unknown;
  const parsed = typeof plan === 'string' ? JSON.parse(plan) : plan;
  const n = Array.isArray(parsed) ? parsed[0]?.Plan?.['Plan Rows'] : undefined;
  return typeof n === 'number' ? n : undefined;
}

async function runWrite(
  ctx: EngineContext,
  cache: SchemaCache,
  api: ApiRequest,
  req: GatewayRequest,
  tx: TransactionOptions,
): Promise<GatewayResponse> {
  const relation = findRelation(cache, api.schema, api.relation);
  const root = planOf(ctx, cache, relation, api, tx.auth, {
    offset: api.nodes.get('')?.offset ?? 0,
    limit: api.nodes.get('')?.limit,
  });
  const prefs = api.preferences;
  let plan;
  if (api.method === 'DELETE') plan = deletePlan(relation, root);
  else {
    if (req.body === undefined) throw catalogue.invalidBody(INVALID_JSON);
    const size =
      typeof req.body === 'string' ? Buffer.byteLength(req.body) : Buffer.byteLength(JSON.stringify(req.body) ?? '');
    if (size > ctx.config.maxBodyBytes) {
      throw catalogue.bodyTooLarge(ctx.config.maxBodyBytes);
    }
    const body = bodyRows(req.body, req.headers['content-type']);
    if (api.method === 'PATCH') plan = updatePlan(api, relation, body, root, cache.viewer);
    else
      plan = insertPlan(api, relation, api.method === 'PUT' ? checkPut(api, relation, body, root) : body, cache.viewer);
  }
  const shape: ReturnShape = prefs.return ?? 'minimal';
  const statement = writeStatement(plan, root, shape, api.accept);
  if (api.plan) return planResponse(ctx, tx, statement, api.plan);
  const strict =
    prefs.handling === 'strict' && prefs.maxAffected !== undefined && api.method !== 'POST' && api.method !== 'PUT';
  const end = prefs.tx === 'rollback' ? 'rollback' : 'commit';
  // Only a strict max-affected and the object media type look at the result before the
  // transaction ends; any other write ends in the same round trip as its statement.
  const checked = strict || api.accept === 'object';
  const results = await runTransaction(
    ctx.db,
    tx,
    [statement],
    checked
      ? (res) => {
          const affected = Number(firstRow(res).total_result_set);
          if (strict && affected > prefs.maxAffected!) {
            throw catalogue.maxAffected(affected);
          }
          // The object media type asks for exactly one row, returned or not (PostgREST 12):
          // otherwise 406 and nothing is changed.
          if (api.accept === 'object' && affected !== 1) throw singularError(affected);
          return end;
        }
      : end,
  );
  const r = firstRow(results);
  const affected = Number(r.total_result_set);
  const headers: Record<string, string> = {};
  const resolved = plan.kind === 'insert' && plan.onConflict !== undefined && api.method === 'POST';
  const applied = preferenceApplied(prefs, api.method, resolved);
  if (applied) headers['Preference-Applied'] = applied;
  const total = prefs.count === 'exact' || prefs.count === 'estimated' ? affected : undefined;
  // PostgREST's ranges: a PATCH gives the range of the rows it changed, the others */total.
  headers['Content-Range'] = api.method === 'PATCH' ? contentRange(0, affected, total) : `*/${total ?? '*'}`;
  const keys = r.location ? (JSON.parse(r.location as string) as string[][]) : [];
  const [key] = keys;
  if (api.method === 'POST' && keys.length === 1 && key) {
    headers.Location = `/${api.relation}?${relation.primaryKey.map((k, i) => `${encodeURIComponent(k)}=eq.${encodeURIComponent(defined(key[i], 'a primary key value of the Location'))}`).join('&')}`;
  }
  // An upsert that only updated answers 200: a POST with merge-duplicates, or a PUT.
  const inserted = r.inserted === null || r.inserted === undefined ? undefined : Number(r.inserted);
  let status: number;
  if (api.method === 'POST') status = inserted === 0 && prefs.resolution === 'merge-duplicates' && resolved ? 200 : 201;
  else if (api.method === 'PUT') status = shape !== 'representation' ? 204 : inserted === 0 ? 200 : 201;
  else status = shape === 'representation' ? 200 : 204;
  if (shape === 'representation') {
    headers['Content-Type'] = CONTENT_TYPES[api.accept];
    return { status, headers, body: r.body as string };
  }
  return { status, headers, body: undefined };
}
