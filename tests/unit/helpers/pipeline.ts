// The real planner without a database: every helper here is one call of actionPlan()
// (plan/action.ts), the function the gateway runs, with a configuration that switches nothing
// off. Tests state a request the way a client writes it (a query string, headers, a body) and
// look at the plan or the SQL; what they check is what the gateway executes.

import type { AuthContext, GatewayMethod, GatewayRequest } from '../../../gateway/engine/call.js';
import {
  actionPlan,
  parseRequest,
  type ActionPlan,
  type CallAction,
  type PlanConfig,
  type ReadAction,
  type WriteAction,
} from '../../../gateway/engine/plan/action.js';
import type { ReadNode, RoutineCall } from '../../../gateway/engine/plan/types.js';
import type { MutationPlan } from '../../../gateway/engine/plan/write.js';
import type { ReadStatements } from '../../../gateway/engine/query/read.js';
import type { ApiRequest } from '../../../gateway/engine/request/types.js';
import { operatorsOf } from '../../../gateway/engine/operators.js';
import type { SchemaCache } from '../../../gateway/engine/schema-cache/types.js';
import { RESPONSE_SETTINGS } from '../../../gateway/engine/query/settings.js';
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
  /** EngineConfig.tenantColumn and tenantClaim, for a caller that has the claim. */
  tenant?: { column: string; claim: string };
  /** EngineConfig.maxResponseBytes: a read's body is counted against it while Postgres builds it. */
  maxResponseBytes?: number;
  /** EngineConfig.idempotency: where Idempotency-Key's records are kept. */
  idempotency?: { claim: string; save: string };
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

function configOf(call: Call): PlanConfig {
  return {
    schemas: [SCHEMA],
    maxEmbedDepth: 100,
    maxSelectWidth: 1600,
    aggregatesEnabled: call.aggregates ?? false,
    planEnabled: true,
    maxBodyBytes: 1024 * 1024 * 1024,
    tenantClaim: call.tenant?.claim ?? 'tenant',
    tenantColumn: call.tenant?.column,
    maxResponseBytes: call.maxResponseBytes,
    idempotency: call.idempotency,
  };
}

/** The plan the gateway makes of `relation` and `call`. */
export function plan(relation: string, call: Call = {}): ActionPlan {
  const auth: AuthContext = { role: 'web_user', claims: call.tenant ? { [call.tenant.claim]: 't1' } : {} };
  return actionPlan(gatewayRequest(relation, call), auth, call.cache ?? defaultCache(), configOf(call));
}

function planOf<K extends ActionPlan['kind']>(kind: K, p: ActionPlan): Extract<ActionPlan, { kind: K }> {
  if (p.kind !== kind) throw new Error(`expected a ${kind} plan, got a ${p.kind} plan`);
  return p as Extract<ActionPlan, { kind: K }>;
}

/** The statements of a read or a call: the main one, and the EXPLAIN of a planned count (not the response settings' read, which every one ends with). */
function statementsOf(p: ReadAction | CallAction): ReadStatements {
  const [main, explain] = p.statements.filter((s) => s !== RESPONSE_SETTINGS);
  return explain ? { main: main!, explain } : { main: main! };
}

/** The parsed request of GET /{relation}?{query} (or of the method `call` names), as the planner reads it. */
export function parse(relation: string, call: Call = {}): ApiRequest {
  return parseRequest(gatewayRequest(relation, call), call.cache ?? defaultCache(), configOf(call));
}

/** The read plan of GET /{relation}?{query}. */
export function planRead(relation: string, call: Call = {}): ReadNode {
  return planOf('read', plan(relation, call)).read;
}

/** The statements GET /{relation}?{query} runs. */
export function compileRead(relation: string, call: Call = {}): ReadStatements {
  return statementsOf(planOf('read', plan(relation, call)));
}

/** The root plan and mutation plan of a write. */
export function planWrite(
  relation: string,
  call: Call & { method: GatewayMethod },
): { api: ApiRequest; root: ReadNode; plan: MutationPlan } {
  const p: WriteAction = planOf('write', plan(relation, call));
  return { api: p.api, root: p.read, plan: p.mutation };
}

/** The one statement a POST/PUT/PATCH/DELETE runs. */
export function compileWrite(relation: string, call: Call & { method: GatewayMethod }): Compiled {
  return planOf('write', plan(relation, call)).statements[0]!;
}

export function planRoutine(fn: string, call: Call = {}): RoutineCall {
  return planOf('call', plan(`rpc/${fn}`, call)).call;
}

/** The statements /rpc/{fn} runs. */
export function compileRoutine(fn: string, call: Call = {}): ReadStatements {
  return statementsOf(planOf('call', plan(`rpc/${fn}`, call)));
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
