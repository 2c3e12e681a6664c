// Response shaping (PostgREST's Response): the GatewayResponse of a plan's results. Status,
// Content-Range on every response, Content-Type, 206/416, the singular object media type (406
// PGRST116), Location, and the Preference-Applied header the plan decided.

import type { Row } from 'postgres';
import type { GatewayResponse } from '../call.js';
import { catalogue, type ApiError } from '../errors/catalogue.js';
import { defined } from '../invariant.js';
import type { ActionPlan, CallAction, ExplainAction, InspectAction, WriteAction } from '../plan/action.js';
import { ESTIMATE_THRESHOLD } from '../query/read.js';
import { isSendableHeader, readsResponseSettings, responseSettingsRow } from '../query/settings.js';
import type { ApiRequest, MediaType } from '../request/types.js';
import type { Relation, Routine } from '../schema-cache/types.js';

/** Each media type's name, as a plan's `for` names it; its Content-Type adds the charset. */
const MEDIA_NAMES: Record<MediaType, string> = {
  json: 'application/json',
  object: 'application/vnd.pgrst.object+json',
  csv: 'text/csv',
  geojson: 'application/geo+json',
};
const CONTENT_TYPES = Object.fromEntries(
  Object.entries(MEDIA_NAMES).map(([media, name]) => [media, `${name}; charset=utf-8`]),
) as Record<MediaType, string>;

/** The Content-Type of a body; stripped nulls keep PostgREST's own media type names. */
function contentType(media: MediaType, stripNulls: boolean): string {
  if (stripNulls && media === 'json') return 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8';
  if (stripNulls && media === 'object') return 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8';
  return CONTENT_TYPES[media];
}

function contentRange(offset: number, pageTotal: number, total: number | undefined): string {
  const t = total === undefined ? '*' : String(total);
  return pageTotal <= 0 ? `*/${t}` : `${offset}-${offset + pageTotal - 1}/${t}`;
}

export function singularError(rows: number): ApiError {
  return catalogue.singular(rows);
}

interface ReadResult {
  total: number | undefined;
  pageTotal: number;
  body: string;
}

function readResponse(
  r: ReadResult,
  offset: number,
  media: MediaType,
  stripNulls: boolean,
  head: boolean,
  applied: string | undefined,
): GatewayResponse {
  if (r.total !== undefined && offset > r.total) {
    throw catalogue.rangeNotSatisfiable(`An offset of ${offset} was requested, but there are only ${r.total} rows.`, {
      'Content-Range': `*/${r.total}`,
    });
  }
  if (media === 'object' && r.pageTotal !== 1) throw singularError(r.pageTotal);
  const status = r.total !== undefined && r.pageTotal < r.total && (offset > 0 || r.pageTotal < r.total) ? 206 : 200;
  const headers: Record<string, string> = {
    'Content-Type': contentType(media, stripNulls),
    'Content-Range': contentRange(offset, r.pageTotal, r.total),
  };
  if (applied) headers['Preference-Applied'] = applied;
  return { status, headers, body: head ? undefined : r.body };
}

/** What the role may do with a relation: columns it may read, insert and update; delete. */
export interface Allowed {
  read: Set<string>;
  insert: Set<string>;
  update: Set<string>;
  /** Columns whose value Postgres makes when an insert leaves them out (identity columns). */
  identity: Set<string>;
  delete: boolean;
}

/** The root's answer before it is written as a document: a schema as the caller's role may use it. */
export interface Described {
  schema: string;
  relations: { relation: Relation; allowed: Allowed }[];
  /** The functions of the schema the role may execute. */
  routines: Routine[];
}

/** How a deployment writes the description of a schema (its OpenAPI document), by the client's Accept. */
export type DescribeSchema = (described: Described, accept: string | undefined) => GatewayResponse;

/** The response of a plan to the rows its statements answered. */
export function respond(
  plan: ActionPlan,
  results: Row[][],
  limits: { maxResponseBytes?: number; describe?: DescribeSchema },
): GatewayResponse {
  // A plan that may write ends with the read of its response settings (plan/action.ts); a read
  // and a read-only call read them in their statement (query/settings.ts).
  const made = answer(plan, readsResponseSettings(plan) ? results.slice(0, -1) : results, limits);
  const settings = responseSettingsRow(plan, results);
  const res = settings ? withSettings(made, settings) : made;
  if (plan.profile === undefined) return res;
  return { status: res.status, headers: { ...res.headers, 'Content-Profile': plan.profile }, body: res.body };
}

/** The status and headers the request's SQL set (response.status, response.headers), over the answer's. */
function withSettings(res: GatewayResponse, settings: Row): GatewayResponse {
  const { response_headers: headers, response_status: status } = settings;
  const set = typeof headers === 'string' && headers !== '' ? settingHeaders(headers) : undefined;
  const setStatus = typeof status === 'string' && status !== '';
  // Most requests set neither: their answer is kept as it is, not copied (every read comes here).
  if (!set && !setStatus) return res;
  return {
    status: setStatus ? settingStatus(status) : res.status,
    headers: set ? { ...res.headers, ...set } : res.headers,
    body: res.body,
  };
}

function settingHeaders(text: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw catalogue.badHeadersSetting();
  }
  if (!Array.isArray(parsed)) throw catalogue.badHeadersSetting();
  const out: Record<string, string> = {};
  for (const item of parsed as unknown[]) {
    const entries = item !== null && typeof item === 'object' && !Array.isArray(item) ? Object.entries(item) : [];
    const [name, value] = entries[0] ?? [];
    if (entries.length !== 1 || typeof name !== 'string' || typeof value !== 'string')
      throw catalogue.badHeadersSetting();
    if (!isSendableHeader(name, value)) throw catalogue.badHeadersSetting();
    out[name] = value;
  }
  return out;
}

function settingStatus(text: string): number {
  // A final status only: a 1xx is not an answer, and Node resets the connection after one.
  if (!/^[2-5][0-9][0-9]$/.test(text.trim())) throw catalogue.badStatusSetting();
  return Number(text.trim());
}

function answer(
  plan: ActionPlan,
  results: Row[][],
  limits: { maxResponseBytes?: number; describe?: DescribeSchema },
): GatewayResponse {
  switch (plan.kind) {
    case 'read':
      return readResult(plan, results, limits.maxResponseBytes);
    case 'write':
      return writeResult(plan, results);
    case 'call':
      return callResult(plan, results, limits.maxResponseBytes);
    case 'explain':
      return explainResult(plan, results);
    case 'inspect':
      return defined(limits.describe, 'a describer for the root')(described(plan, results), plan.accept);
  }
}

/**
 * The first row of the first statement: every engine statement answers exactly one row (its body
 * is one json_agg), so a missing one is a bug.
 */
function firstRow(results: Row[][]): Row {
  return defined(results[0]?.[0], "the statement's row");
}

/** What a one-row insert's statement (the INSERT alone, query/write.ts) answers by no row: it wrote none. */
const NOTHING_WRITTEN: Row = { total_result_set: '0', page_total: 0, body: null, location: null, inserted: null };

/** The row of a write's statement; none only from a one-row insert that ON CONFLICT skipped. */
const writtenRow = (results: Row[][]): Row => defined(results[0], "the write's rows")[0] ?? NOTHING_WRITTEN;

/** The rows a write or a call changed (or returned), as its AffectedCheck counts them. */
export const affectedRows = (results: Row[][], column: 'total_result_set' | 'page_total'): number =>
  Number(writtenRow(results)[column]);

function plannedRows(rows: Row[] | undefined): number | undefined {
  const plan = rows?.[0]?.['QUERY PLAN'] as unknown;
  const parsed = typeof plan === 'string' ? JSON.parse(plan) : plan;
  const n = Array.isArray(parsed) ? parsed[0]?.Plan?.['Plan Rows'] : undefined;
  return typeof n === 'number' ? n : undefined;
}

/**
 * Refuses a body over the bound. Postgres stopped building it at the first row past the bound
 * (query/read.ts), so what is left to check is what the rows' count leaves out: the array's
 * brackets, a CSV header.
 */
function withinBound(body: unknown, maxResponseBytes: number | undefined): void {
  // A UTF-16 code unit is at most three bytes of UTF-8: most bodies are judged by their length.
  if (maxResponseBytes === undefined || typeof body !== 'string' || body.length * 3 <= maxResponseBytes) return;
  const bytes = Buffer.byteLength(body);
  if (bytes > maxResponseBytes) throw catalogue.responseTooLarge(bytes, maxResponseBytes);
}

/** The response of a read statement (and its EXPLAIN for planned counts), as PostgREST shapes it. */
function readResult(
  plan: { api: ApiRequest; applied: string | undefined },
  results: Row[][],
  maxResponseBytes: number | undefined,
): GatewayResponse {
  const { api } = plan;
  const count = api.preferences.count;
  const row = firstRow(results);
  withinBound(row.body, maxResponseBytes);
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
  return readResponse(
    { total, pageTotal: row.page_total as number, body: row.body as string },
    api.range.offset,
    api.accept,
    api.stripNulls,
    api.method === 'HEAD',
    plan.applied,
  );
}

function callResult(plan: CallAction, results: Row[][], maxResponseBytes: number | undefined): GatewayResponse {
  const { api } = plan;
  const applied: Record<string, string> = plan.applied ? { 'Preference-Applied': plan.applied } : {};
  const returns = plan.call.routine.returns;
  if (returns.kind === 'void') return { status: 204, headers: applied, body: undefined };
  if (returns.kind === 'scalar') {
    // A scalar's rows (one, or a set's) are counted as a table's: Content-Range, count=exact.
    const row = firstRow(results);
    const rows = row.page_total as number;
    const count = api.preferences.count;
    const counted = count === 'exact' || count === 'estimated' || count === 'planned';
    withinBound(row.body, maxResponseBytes);
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
  return readResult(plan, results, maxResponseBytes);
}

function writeResult(plan: WriteAction, results: Row[][]): GatewayResponse {
  const { api, shape } = plan;
  const prefs = api.preferences;
  const r = writtenRow(results);
  const affected = Number(r.total_result_set);
  const headers: Record<string, string> = {};
  if (plan.applied) headers['Preference-Applied'] = plan.applied;
  const total = prefs.count === 'exact' || prefs.count === 'estimated' ? affected : undefined;
  // PostgREST's ranges: a PATCH gives the range of the rows it changed, the others */total.
  headers['Content-Range'] = api.method === 'PATCH' ? contentRange(0, affected, total) : `*/${total ?? '*'}`;
  const keys = r.location ? (JSON.parse(r.location as string) as (string | null)[][]) : [];
  const [key] = keys;
  if (api.method === 'POST' && keys.length === 1 && key) {
    headers.Location = `/${api.relation}?${plan.relation.primaryKey.map((k, i) => locationFilter(k, key[i])).join('&')}`;
  }
  // An upsert that only updated answers 200: a POST with merge-duplicates, or a PUT.
  const inserted = r.inserted === null || r.inserted === undefined ? undefined : Number(r.inserted);
  let status: number;
  if (api.method === 'POST')
    status = inserted === 0 && prefs.resolution === 'merge-duplicates' && plan.resolved ? 200 : 201;
  else if (api.method === 'PUT') status = shape !== 'representation' ? 204 : inserted === 0 ? 200 : 201;
  else status = shape === 'representation' ? 200 : 204;
  if (shape === 'representation') {
    headers['Content-Type'] = contentType(api.accept, api.stripNulls);
    return { status, headers, body: r.body as string };
  }
  return { status, headers, body: undefined };
}

/** One key of a Location: `k=eq.v`, or `k=is.null` for a key a view left null (an outer join's). */
function locationFilter(column: string, value: string | null | undefined): string {
  const k = encodeURIComponent(column);
  if (value === null) return `${k}=is.null`;
  return `${k}=eq.${encodeURIComponent(defined(value, 'a primary key value of the Location'))}`;
}

function explainResult({ media }: ExplainAction, results: Row[][]): GatewayResponse {
  const rows = defined(results[0], 'the EXPLAIN rows');
  const json = media.format === 'json' ? firstRow(results)['QUERY PLAN'] : undefined;
  const body =
    media.format === 'json'
      ? typeof json === 'string'
        ? json
        : JSON.stringify(json)
      : rows.map((r) => r['QUERY PLAN'] as string).join('\n');
  const type = `application/vnd.pgrst.plan+${media.format}; for="${MEDIA_NAMES[media.for]}"${media.options.length ? `; options=${media.options.join('|')}` : ''}; charset=utf-8`;
  return { status: 200, headers: { 'Content-Type': type }, body };
}

/** The relations and functions of the inspected schema with what the caller's role may do with them. */
function described(plan: InspectAction, [columns, executable]: Row[][]): Described {
  const allowed = new Map<number, Allowed>();
  for (const r of defined(columns, 'the column privileges')) {
    let a = allowed.get(r.oid as number);
    if (!a)
      allowed.set(
        r.oid as number,
        (a = { read: new Set(), insert: new Set(), update: new Set(), identity: new Set(), delete: false }),
      );
    const column = r.column as string;
    if (r.read) a.read.add(column);
    if (r.insert) a.insert.add(column);
    if (r.update) a.update.add(column);
    if (r.identity) a.identity.add(column);
    a.delete = r.delete === true;
  }
  const callable = new Set(defined(executable, 'the executable functions').map((r) => r.oid as number));
  return {
    schema: plan.schema,
    relations: plan.relations.flatMap((relation) => {
      const a = allowed.get(relation.oid);
      return a ? [{ relation, allowed: a }] : [];
    }),
    routines: plan.routines.filter((r) => callable.has(r.oid)),
  };
}
