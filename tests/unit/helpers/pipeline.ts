// parse → plan → compile without a database: the same calls, in the same order, that
// gateway.ts makes before it hands statements to execute. Tests state a request the way a
// client writes it (a query string, headers, a body) and look at the plan or the SQL.

import type { GatewayMethod, GatewayRequest } from '../../../gateway/engine/call.js';
import { AliasCounter, findRelation, readPlan } from '../../../gateway/engine/plan/read.js';
import { findRoutines, routinePlan } from '../../../gateway/engine/plan/routine.js';
import type { ReadNode, RoutineCall } from '../../../gateway/engine/plan/types.js';
import {
  bodyRows,
  checkPut,
  deletePlan,
  insertPlan,
  updatePlan,
  type MutationPlan,
} from '../../../gateway/engine/plan/write.js';
import { readStatement, type ReadStatements } from '../../../gateway/engine/query/read.js';
import { routineSource, scalarStatement } from '../../../gateway/engine/query/routine.js';
import { writeStatement, type ReturnShape } from '../../../gateway/engine/query/write.js';
import { parseApiRequest, routineName } from '../../../gateway/engine/request/parse.js';
import type { ApiRequest } from '../../../gateway/engine/request/types.js';
import { operatorsOf } from '../../../gateway/engine/operators.js';
import type { SchemaCache } from '../../../gateway/engine/schema-cache/types.js';
import { blogSchema, SCHEMA } from './schema.js';

/** The cache of calls that bring none; blogSchema() makes a fresh one for a test that changes it. */
let shared: SchemaCache | undefined;
const defaultCache = (): SchemaCache => (shared ??= blogSchema().cache);

export interface Compiled {
  readonly text: string;
  readonly params: readonly (string | null)[];
}

export interface Call {
  method?: GatewayMethod;
  /** The query string as a client sends it (without "?"): `select=id&id=eq.1`; or its decoded pairs. */
  query?: string | [string, string][];
  headers?: Record<string, string>;
  body?: unknown;
  cache?: SchemaCache;
  aggregates?: boolean;
  /** EngineConfig.tenant, for a caller that has the claim. */
  tenant?: { column: string; claim: string };
}

function gatewayRequest(relation: string, call: Call = {}): GatewayRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(call.headers ?? {})) headers[k.toLowerCase()] = v;
  return {
    method: call.method ?? 'GET',
    relation,
    query: new URLSearchParams(call.query ?? ''),
    headers,
    body: call.body,
  };
}

/** parseApiRequest, with GET /rpc argument keys told apart as gateway.ts does it. */
export function parse(relation: string, call: Call = {}): ApiRequest {
  const cache = call.cache ?? defaultCache();
  const fn = routineName(relation);
  let isArgument: ((key: string) => boolean) | undefined;
  if (fn !== undefined && (call.method ?? 'GET') !== 'POST') {
    const names = new Set(
      findRoutines(cache, SCHEMA, fn)
        .flatMap((r) => r.params.map((p) => p.name))
        .filter((n) => n !== ''),
    );
    isArgument = (key) => names.has(key);
  }
  return parseApiRequest(gatewayRequest(relation, call), SCHEMA, isArgument);
}

/** The read plan of GET /{relation}?{query}. */
export function planRead(relation: string, call: Call = {}): ReadNode {
  const cache = call.cache ?? defaultCache();
  const api = parse(relation, { ...call, cache });
  return readPlan({
    cache,
    relation: findRelation(cache, SCHEMA, api.relation),
    select: api.select,
    nodes: api.nodes,
    range: api.range,
    aliases: new AliasCounter(),
    aggregatesEnabled: call.aggregates ?? false,
    tenant: call.tenant,
  });
}

/** The statements GET /{relation}?{query} runs. */
export function compileRead(relation: string, call: Call = {}): ReadStatements {
  const api = parse(relation, call);
  return readStatement(planRead(relation, call), api.accept, api.preferences.count);
}

/** The root plan and mutation plan of a write, as runWrite builds them. */
export function planWrite(
  relation: string,
  call: Call & { method: GatewayMethod },
): { api: ApiRequest; root: ReadNode; plan: MutationPlan } {
  const cache = call.cache ?? defaultCache();
  const req = gatewayRequest(relation, call);
  const api = parseApiRequest(req, SCHEMA);
  const rel = findRelation(cache, SCHEMA, api.relation);
  const root = readPlan({
    cache,
    relation: rel,
    select: api.select,
    nodes: api.nodes,
    range: { offset: api.nodes.get('')?.offset ?? 0, limit: api.nodes.get('')?.limit },
    aliases: new AliasCounter(),
    aggregatesEnabled: call.aggregates ?? false,
    tenant: call.tenant,
  });
  if (api.method === 'DELETE') return { api, root, plan: deletePlan(rel, root) };
  const body = bodyRows(req.body, req.headers['content-type']);
  if (api.method === 'PATCH') return { api, root, plan: updatePlan(api, rel, body, root) };
  return { api, root, plan: insertPlan(api, rel, api.method === 'PUT' ? checkPut(api, rel, body, root) : body) };
}

/** The one statement a POST/PUT/PATCH/DELETE runs. */
export function compileWrite(relation: string, call: Call & { method: GatewayMethod }): Compiled {
  const { api, root, plan } = planWrite(relation, call);
  const shape: ReturnShape = api.preferences.return ?? 'minimal';
  return writeStatement(plan, root, shape, api.accept);
}

export function planRoutine(fn: string, call: Call = {}): RoutineCall {
  const cache = call.cache ?? defaultCache();
  const api = parse(`rpc/${fn}`, { ...call, cache });
  return routinePlan(cache, api, call.body, call.headers?.['content-type']);
}

/** The statements /rpc/{fn} runs, as runRoutine builds them. */
export function compileRoutine(fn: string, call: Call = {}): ReadStatements {
  const cache = call.cache ?? defaultCache();
  const api = parse(`rpc/${fn}`, { ...call, cache });
  const routine = routinePlan(cache, api, call.body, call.headers?.['content-type']);
  const returns = routine.routine.returns;
  if (returns.kind !== 'composite') return { main: scalarStatement(routine) };
  const root = readPlan({
    cache,
    relation: returns.relation!,
    select: api.select,
    nodes: api.nodes,
    range: api.range,
    aliases: new AliasCounter(),
    aggregatesEnabled: call.aggregates ?? false,
    tenant: call.tenant,
  });
  return readStatement(root, api.accept, api.preferences.count, routineSource(routine, root.alias));
}

/** What an ApiError carries to the client, for toMatchObject. */
export function failure(fn: () => unknown): {
  status: number;
  code: string;
  message: string;
  details: string | null;
  hint: string | null;
} {
  try {
    fn();
  } catch (err) {
    const e = err as { status: number; code: string; message: string; details: string | null; hint: string | null };
    return { status: e.status, code: e.code, message: e.message, details: e.details, hint: e.hint };
  }
  throw new Error('expected an error, but the call succeeded');
}

/** Operators whose value is one scalar text: not in's list, is's keyword or a text search's words. */
export const SCALAR_OPERATORS = operatorsOf('compare', 'pattern', 'binary');
