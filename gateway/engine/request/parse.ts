// GatewayRequest (strings from the client) → ApiRequest (PostgREST's grammar, still untrusted
// names). Pure: no schema cache, no I/O.

import type { GatewayRequest } from '../call.js';
import { catalogue } from '../errors/catalogue.js';
import {
  parseColumnList,
  parseLogic,
  parseOperation,
  parseOrder,
  parseSelect,
  parseTreePath,
  toFilter,
} from './grammar.js';
import {
  PLAN_OPTIONS,
  RESERVED_KEYS,
  isReservedKey,
  type ApiRequest,
  type MediaType,
  type NodeOptions,
  type PlanMedia,
  type PlanOption,
  type Preferences,
  type RangeRequest,
  type ReservedKeyOf,
} from './types.js';
import { MAX_JSON_DEPTH, tooDeep } from './json.js';

/**
 * A 400 for a body value nested deeper than MAX_JSON_DEPTH (a surface's value; JSON text is
 * checked as it is parsed); iterative, so any depth is safe to check.
 */
export function refuseDeepJson(body: unknown): void {
  const stack: [unknown, number][] = [[body, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) throw tooDeep();
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
}

/** The function a GatewayRequest addresses: relation 'rpc/{name}' (see call.ts). */
export function routineName(relation: string): string | undefined {
  return relation.startsWith('rpc/') ? relation.slice(4) : undefined;
}

/**
 * `isArgument` (GET /rpc only) says which query parameters are the function's arguments; every
 * other keeps its meaning (select, order, filters on the result).
 */
export function parseApiRequest(
  req: GatewayRequest,
  schema: string,
  isArgument?: (key: string, value: string) => boolean,
): ApiRequest {
  const query = parseQuery(req.query, isArgument);
  const preferences = parsePreferences(req.headers.prefer);
  const root = query.nodes.get('');
  // The Range header pages a read; PostgREST ignores it on every other method (a POST to /rpc too).
  const read = req.method === 'GET' || req.method === 'HEAD';
  const range = parseRange(read ? req.headers.range : undefined, root?.limit, root?.offset);
  const routine = routineName(req.relation);
  const accept = parseAccept(req.headers.accept);
  return {
    method: req.method,
    schema,
    relation: routine ?? req.relation,
    routine,
    routineArgs: query.routineArgs,
    select: query.select ?? [{ kind: 'star' }],
    selectGiven: query.select !== undefined,
    nodes: query.nodes,
    range,
    preferences,
    accept: accept.media,
    stripNulls: accept.stripNulls ?? false,
    plan: accept.plan,
    onConflict: query.onConflict,
    columns: query.columns,
  };
}

/** What a query string says: the request's own keys, the function's arguments, and each node's options and filters. */
interface Query {
  select?: ApiRequest['select'];
  onConflict?: string[];
  columns?: string[];
  routineArgs: Map<string, string[]>;
  /** By embedded path ('' is the root). */
  nodes: Map<string, NodeOptions>;
}

function parseQuery(params: URLSearchParams, isArgument: ((key: string, value: string) => boolean) | undefined): Query {
  const query: Query = { routineArgs: new Map(), nodes: new Map() };
  for (const [key, value] of params) {
    if (isReservedKey(key) && RESERVED_KEYS[key] === 'request')
      REQUEST_KEYS[key as ReservedKeyOf<'request'>](query, value);
    else if (isArgument?.(key, value)) query.routineArgs.set(key, [...(query.routineArgs.get(key) ?? []), value]);
    else parseNodeKey(query.nodes, key, value);
  }
  return query;
}

const REQUEST_KEYS: Record<ReservedKeyOf<'request'>, (query: Query, value: string) => void> = {
  select: (query, value) => (query.select = parseSelect(value)),
  on_conflict: (query, value) => (query.onConflict = parseColumnList(value, 'on_conflict parameter')),
  columns: (query, value) => (query.columns = parseColumnList(value, 'columns parameter')),
  apikey: () => undefined, // authenticated by the surface, not a filter
};

const NODE_KEYS: Record<
  ReservedKeyOf<'node'>,
  (n: NodeOptions, value: string, key: string, negate: boolean) => void
> = {
  order: (n, value) => (n.order = parseOrder(value)),
  limit: (n, value, key) => (n.limit = nonNegative(value, key)),
  offset: (n, value, key) => (n.offset = nonNegative(value, key)),
  or: (n, value, _key, negate) => n.conditions.push(parseLogic('or', negate, value)),
  and: (n, value, _key, negate) => n.conditions.push(parseLogic('and', negate, value)),
};

/** A key of a node (the root or an embedded path): `[path.]order=…` and the like, or a filter. */
function parseNodeKey(nodes: Map<string, NodeOptions>, key: string, value: string): void {
  const segments = key.split('.');
  const last = segments[segments.length - 1] ?? '';
  if (isReservedKey(last) && RESERVED_KEYS[last] === 'node') {
    let pathSegments = segments.slice(0, -1);
    let negate = false;
    if ((last === 'or' || last === 'and') && pathSegments[pathSegments.length - 1] === 'not') {
      negate = true;
      pathSegments = pathSegments.slice(0, -1);
    }
    NODE_KEYS[last as ReservedKeyOf<'node'>](nodeAt(nodes, pathSegments.join('.')), value, key, negate);
    return;
  }
  // A filter: [embedded.path.]column[->json]=[not.]op.value
  const { path, field } = parseTreePath(key);
  if (field.json.length === 0 && isReservedKey(field.name)) return;
  const filter = toFilter(field, parseOperation(value));
  nodeAt(nodes, path.join('.')).conditions.push({ kind: 'filter', filter });
}

function nodeAt(nodes: Map<string, NodeOptions>, path: string): NodeOptions {
  let n = nodes.get(path);
  if (!n) nodes.set(path, (n = { conditions: [] }));
  return n;
}

/** The largest limit or offset a query string can give (nonNegative reads at most 15 digits). */
export const MAX_OFFSET = 999_999_999_999_999;

function nonNegative(raw: string, key: string): number {
  // As PostgREST: a negative limit cannot be satisfied (416), a negative offset skips nothing.
  if (/^-\d{1,15}$/.test(raw.trim())) {
    if (key.endsWith('limit')) throw catalogue.rangeNotSatisfiable('Limit should be greater than or equal to zero.');
    return 0;
  }
  if (!/^\d{1,15}$/.test(raw.trim())) {
    throw catalogue.parse(
      `${key} parameter (${raw})`,
      'expecting a non-negative integer',
      `Write ${key}=<n> with n ≥ 0`,
    );
  }
  return Number(raw.trim());
}

/** The Range header (`0-9`, `items=0-9`, `10-`) combined with limit/offset parameters. */
export function parseRange(
  header: string | undefined,
  limit: number | undefined,
  offset: number | undefined,
): RangeRequest {
  let lower = 0;
  let upper: number | undefined;
  if (header !== undefined && header.trim() !== '') {
    const m = /^\s*(?:items=)?(\d{1,15})-(\d{0,15})\s*$/.exec(header);
    if (m) {
      lower = Number(m[1]);
      upper = m[2] === '' ? undefined : Number(m[2]);
      if (upper !== undefined && upper < lower) {
        throw catalogue.rangeNotSatisfiable(
          'The lower boundary must be lower than or equal to the upper boundary in the Range header.',
        );
      }
    }
  }
  if (offset !== undefined) lower = Math.max(lower, offset);
  if (limit !== undefined) {
    const upperFromLimit = (offset ?? lower) + limit - 1;
    upper = upper === undefined ? upperFromLimit : Math.min(upper, upperFromLimit);
  }
  if (upper === undefined) return { offset: lower };
  return { offset: lower, limit: Math.max(0, upper - lower + 1) };
}

const KNOWN_PREFERENCES = new Set([
  'return',
  'count',
  'resolution',
  'missing',
  'handling',
  'max-affected',
  'tx',
  'params',
]);

/** Prefer: header values, comma separated; unknown ones are reported under handling=strict. */
export function parsePreferences(header: string | undefined): Preferences {
  const prefs: Preferences = { understood: [], invalid: [] };
  if (!header) return prefs;
  const seen = new Set<string>();
  for (const raw of header.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const [k = '', v = ''] = item.split('=').map((s) => s.trim());
    let ok = true;
    // The first of a repeated preference wins, as in PostgREST.
    if (seen.has(k)) continue;
    switch (k) {
      case 'return':
        if (v === 'minimal' || v === 'headers-only' || v === 'representation') prefs.return = v;
        else ok = false;
        break;
      case 'count':
        if (v === 'exact' || v === 'planned' || v === 'estimated') prefs.count = v;
        else ok = false;
        break;
      case 'resolution':
        if (v === 'merge-duplicates' || v === 'ignore-duplicates') prefs.resolution = v;
        else ok = false;
        break;
      case 'missing':
        if (v === 'default' || v === 'null') prefs.missing = v;
        else ok = false;
        break;
      case 'handling':
        if (v === 'strict' || v === 'lenient') prefs.handling = v;
        else ok = false;
        break;
      case 'max-affected':
        if (/^\d{1,12}$/.test(v)) prefs.maxAffected = Number(v);
        else ok = false;
        break;
      case 'tx':
        if (v === 'commit' || v === 'rollback') prefs.tx = v;
        else ok = false;
        break;
      case 'params':
        if (v === 'single-object') prefs.params = v;
        else ok = false;
        break;
      case 'timezone': // accepted and ignored: responses carry Postgres's own timestamp text
        ok = false;
        break;
      default:
        ok = false;
    }
    if (!ok) prefs.invalid.push(item);
    else if (KNOWN_PREFERENCES.has(k)) seen.add(k);
  }
  if (prefs.handling === 'strict' && prefs.invalid.length > 0) {
    throw catalogue.strictPreferences(prefs.invalid);
  }
  return prefs;
}

/** An Accept header's media ranges: split on the commas outside double quotes (`for="a,b"`). */
function mediaRanges(header: string): string[] {
  return header.match(/(?:[^,"]|"[^"]*")+/g) ?? [];
}

const MEDIA: Record<string, MediaType> = {
  'application/json': 'json',
  'application/*': 'json',
  '*/*': 'json',
  'application/vnd.pgrst.array+json': 'json',
  'application/vnd.pgrst.array': 'json',
  'application/vnd.pgrst.object+json': 'object',
  'application/vnd.pgrst.object': 'object',
  'text/csv': 'csv',
  'text/*': 'csv',
  'application/geo+json': 'geojson',
};

const PLAN_MEDIA: Record<string, PlanMedia['format']> = {
  'application/vnd.pgrst.plan': 'text',
  'application/vnd.pgrst.plan+text': 'text',
  'application/vnd.pgrst.plan+json': 'json',
};

/**
 * The best media type of an Accept header that Tally can produce; 406 PGRST107 otherwise.
 * A plan media type (`application/vnd.pgrst.plan+json; for="application/json"; options=analyze|buffers`)
 * asks for EXPLAIN of the query that the `for` media type would run.
 */
export function parseAccept(header: string | undefined): { media: MediaType; plan?: PlanMedia; stripNulls?: true } {
  if (!header || header.trim() === '') return { media: 'json' };
  const ranked = mediaRanges(header)
    .map((part, i) => {
      const [type = '', ...params] = part
        .trim()
        .split(';')
        .map((s) => s.trim());
      const q = params.find((p) => p.startsWith('q='));
      return { type: type.toLowerCase(), params, q: q ? Number(q.slice(2)) : 1, i };
    })
    .filter((m) => m.type !== '' && !(m.q <= 0))
    .sort((a, b) => b.q - a.q || a.i - b.i);
  for (const m of ranked) {
    const media = MEDIA[m.type];
    // PostgREST's stripped nulls: a parameter of its own array and object media types only.
    if (
      media &&
      m.type.startsWith('application/vnd.pgrst.') &&
      m.params.some((p) => p.toLowerCase() === 'nulls=stripped')
    )
      return { media, stripNulls: true };
    if (media) return { media };
    const format = PLAN_MEDIA[m.type];
    if (format) {
      const param = (name: string) =>
        m.params
          .find((p) => p.toLowerCase().startsWith(`${name}=`))
          ?.slice(name.length + 1)
          .replace(/^"|"$/g, '');
      const forType = param('for');
      const forMedia = forType === undefined ? 'json' : MEDIA[forType.toLowerCase()];
      const options = (param('options') ?? '')
        .split('|')
        .map((o) => o.trim().toLowerCase())
        .filter((o) => o !== '');
      if (forMedia && options.every((o) => (PLAN_OPTIONS as readonly string[]).includes(o))) {
        return { media: forMedia, plan: { format, for: forMedia, options: options as PlanOption[] } };
      }
    }
  }
  throw catalogue.notAcceptable(
    header,
    'Ask for application/json, application/vnd.pgrst.object+json, text/csv or application/geo+json',
  );
}
