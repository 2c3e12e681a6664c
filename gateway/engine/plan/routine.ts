// routinePlan: /rpc/{function} resolved against the schema cache (PostgREST's CallPlan). The
// overload is chosen by argument names, as PostgREST chooses it: every required parameter given,
// every given key a parameter; else the fallback of one unnamed json/jsonb parameter that takes
// the whole body. A POST of text/plain, text/xml or application/octet-stream goes whole to the one
// unnamed text, xml or bytea parameter instead, and is never read as JSON. Only names that
// matched a parameter reach SQL; values stay one JSON parameter.

import { catalogue, NEW_FUNCTION_HINT, type ApiError } from '../errors/catalogue.js';
import { isReservedKey, type ApiRequest } from '../request/types.js';
import { closeName, type Routine, type RoutineParam, type SchemaCache } from '../schema-cache/types.js';
import type { RoutineCall } from './types.js';
import { defined } from '../invariant.js';
import { parseJsonText } from '../request/json.js';
import { levenshtein } from './missing-column.js';
import { withheldError } from '../schema-cache/isolation.js';

export function findRoutines(cache: SchemaCache, schema: string, name: string): Routine[] {
  return cache.routines.get(`${schema}.${name}`) ?? [];
}

const isJson = (p: RoutineParam | undefined) =>
  p !== undefined && !p.isArray && (p.baseType === 'json' || p.baseType === 'jsonb');
/** The parameter of a function that has exactly one. */
const onlyParam = (r: Routine): RoutineParam | undefined => (r.params.length === 1 ? r.params[0] : undefined);
const signature = (r: Routine) =>
  `${r.schema}.${r.name}(${r.params.map((p) => (p.name ? `${p.name} => ${p.baseType}${p.isArray ? '[]' : ''}` : `${p.baseType}${p.isArray ? '[]' : ''}`)).join(', ')})`;

/** How a call was sent: PGRST202's wording depends on it, as PostgREST's NoRpc error's does. */
export interface Invocation {
  post: boolean;
  contentType: string | undefined;
}

/** The unnamed parameter PostgREST passes a POST body of these media types to whole. */
const RAW_BODY_PARAM: Record<string, string> = {
  'text/plain': 'text',
  'text/xml': 'xml',
  'application/octet-stream': 'bytea',
};

const mediaType = (contentType: string | undefined) => (contentType ?? '').split(';')[0]!.trim().toLowerCase();
/** The type of the one unnamed parameter a POST's body is passed to whole, by its media type. */
const rawBodyParam = ({ post, contentType }: Invocation): string | undefined =>
  post ? RAW_BODY_PARAM[mediaType(contentType)] : undefined;

/**
 * PGRST202: no function of that name takes these arguments. Worded as PostgREST words it: a POST
 * of text, xml or bytes searched for the one unnamed parameter of that type (no hint); a POST of
 * JSON (or no Content-Type) also for one unnamed json/jsonb parameter; a GET only by names.
 */
export function routineNotFound(
  cache: SchemaCache,
  schema: string,
  name: string,
  keys: string[],
  { post, contentType }: Invocation,
): ApiError {
  const fn = `${schema}.${name}`;
  const withheld = cache.withheld?.get(fn);
  if (withheld) return withheldError(fn, withheld);
  const type = mediaType(contentType);
  const raw = rawBodyParam({ post, contentType });
  if (raw !== undefined)
    return catalogue.noFunction(
      fn,
      `Searched for the function ${fn} with a single unnamed ${raw} parameter, but no matches were found in the schema cache.`,
      null,
    );
  const sorted = [...keys].sort();
  const byNames = sorted.length
    ? ` with parameter${sorted.length > 1 ? 's' : ''} ${sorted.join(', ')}`
    : ' without parameters';
  const orJson = post && (type === '' || type === 'application/json');
  const close = closeCall(cache, schema, name, sorted);
  return catalogue.noFunction(
    sorted.length ? `${fn}(${sorted.join(', ')})` : `${fn} without parameters`,
    `Searched for the function ${fn}${byNames}${orJson ? ' or with a single unnamed json/jsonb parameter' : ''}, but no matches were found in the schema cache.`,
    close ? `Perhaps you meant to call the function ${schema}.${close}` : NEW_FUNCTION_HINT,
  );
}

/** PostgREST's least likeness for a parameter list it suggests (FuzzySet's getOne default). */
const MIN_PARAMS_LIKENESS = 0.33;

/**
 * The call a PGRST202 hint suggests, as PostgREST's does: for a function of that name, the
 * overload whose parameter names, sorted, read closest to the given ones (`name(a, b)`); else
 * another function's name. PostgREST ranks lists with a fuzzy set re-scored by edit distance;
 * the edit distance alone gives its suggestions for the lists functions have.
 */
function closeCall(cache: SchemaCache, schema: string, name: string, sortedKeys: string[]): string | undefined {
  const overloads = findRoutines(cache, schema, name);
  if (overloads.length === 0) {
    const others = [...cache.routines.values()]
      .flat()
      .filter((r) => r.schema === schema)
      .map((r) => r.name);
    return closeName(others, name);
  }
  const given = `(${sortedKeys.join(', ')})`;
  let best: { list: string; likeness: number } | undefined;
  for (const r of overloads) {
    const list = `(${r.params
      .map((p) => p.name)
      .sort()
      .join(', ')})`;
    const likeness = 1 - levenshtein(given, list) / Math.max(given.length, list.length);
    if (likeness >= MIN_PARAMS_LIKENESS && (best === undefined || likeness > best.likeness)) best = { list, likeness };
  }
  return best && `${name}${best.list}`;
}

/** The argument keys a request gives: the body's keys (POST) or the query's argument keys (GET). */
export function argumentKeys(api: ApiRequest, rawBody: unknown, contentType?: string): string[] {
  if (rawBodyParam({ post: api.method === 'POST', contentType })) return [];
  if (api.method === 'POST') return Object.keys(namedObject(bodyValue(rawBody, contentType), api.columns) ?? {});
  return [...api.routineArgs.keys()].filter((k) => !isReservedKey(k));
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The named arguments a POST body gives, as PostgREST reads them: its object, or the first object
 * of an array; with columns=, the named keys only (one the object leaves out is null).
 */
function namedObject(body: unknown, columns: string[] | undefined): Record<string, unknown> | undefined {
  const object = Array.isArray(body) && isObject(body[0]) ? body[0] : body;
  if (!isObject(object)) return undefined;
  return columns ? Object.fromEntries(columns.map((c) => [c, object[c] ?? null])) : object;
}

const isForm = (contentType: string | undefined): boolean =>
  (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'application/x-www-form-urlencoded';

/** A POST body as a JSON value: JSON already parsed by the surface, or a form body. */
function bodyValue(body: unknown, contentType: string | undefined): unknown {
  if (body === undefined || body === '') return {};
  if (typeof body === 'string' && isForm(contentType)) {
    const form = new URLSearchParams(body);
    return Object.fromEntries(
      [...new Set(form.keys())].map((k) => {
        const all = form.getAll(k);
        return [k, all.length > 1 ? all : all[0]];
      }),
    );
  }
  if (typeof body === 'string') return parseJsonText(body);
  return body;
}

export function routinePlan(
  cache: SchemaCache,
  api: ApiRequest,
  rawBody: unknown,
  contentType: string | undefined,
): RoutineCall {
  const given = givenArguments(api, rawBody, contentType);
  const { routine, single } = chooseOverload(cache, api, given);
  if (given.raw !== undefined)
    return {
      routine,
      args: { kind: 'body', param: defined(onlyParam(routine), 'the body parameter'), text: given.rawText },
      readOnly: routine.volatility !== 'volatile',
    };
  // GET runs any function, VOLATILE too, in a READ ONLY transaction (as PostgREST): one that
  // writes fails there with 25006.
  const readOnly = !given.post || routine.volatility !== 'volatile';
  if (single)
    return {
      routine,
      args: {
        kind: 'single',
        param: defined(onlyParam(routine), 'the single-object parameter'),
        json: given.bodyJson ?? JSON.stringify(given.body),
      },
      readOnly,
    };
  return { routine, args: namedArguments(routine, api, given), readOnly };
}

/** What a call gives, before a function is chosen. */
interface GivenArguments extends Invocation {
  /** The type of the one unnamed parameter a text, xml or bytes body goes to (no JSON read). */
  raw: string | undefined;
  rawText: string;
  /** The POST body as a JSON value. */
  body: unknown;
  /** JSON text reaches SQL as the client wrote it (numbers exact); a value or a form, as JSON. */
  bodyJson: string | undefined;
  /** The named arguments of a POST (see namedObject). */
  named: Record<string, unknown> | undefined;
  /** The body is a JSON object of named arguments. */
  isObject: boolean;
  keys: string[];
}

function givenArguments(api: ApiRequest, rawBody: unknown, contentType: string | undefined): GivenArguments {
  const post = api.method === 'POST';
  const raw = rawBodyParam({ post, contentType });
  if (raw !== undefined) {
    const rawText = typeof rawBody === 'string' ? rawBody : '';
    return {
      post,
      contentType,
      raw,
      rawText,
      body: rawText,
      bodyJson: undefined,
      named: undefined,
      isObject: false,
      keys: [],
    };
  }
  const body = post ? bodyValue(rawBody, contentType) : undefined;
  const bodyJson = typeof rawBody === 'string' && rawBody !== '' && !isForm(contentType) ? rawBody : undefined;
  const named = post ? namedObject(body, api.columns) : undefined;
  const keys = post ? Object.keys(named ?? {}) : argumentKeys(api, undefined);
  return { post, contentType, raw, rawText: '', body, bodyJson, named, isObject: named !== undefined, keys };
}

/** The one function of the name that takes these arguments (the rules at the top of this file). */
function chooseOverload(
  cache: SchemaCache,
  api: ApiRequest,
  given: GivenArguments,
): { routine: Routine; single: boolean } {
  const { chosen, single } = candidates(findRoutines(cache, api.schema, api.relation), api, given);
  const [routine] = chosen;
  if (routine === undefined) {
    if (given.post && !given.isObject && given.raw === undefined) {
      throw catalogue.invalidBody(
        'expected a JSON object of named arguments',
        null,
        'Send {"argument": value, …}, or give the function one unnamed json/jsonb parameter to receive any JSON',
      );
    }
    throw routineNotFound(cache, api.schema, api.relation, given.keys, given);
  }
  if (chosen.length > 1) {
    throw catalogue.ambiguousFunction(chosen.map(signature));
  }
  return { routine, single };
}

/**
 * The overloads these arguments may call: each whose parameters are all named, required ones
 * given and no key unknown; else (POST) those of one unnamed json/jsonb parameter, which takes
 * the whole body (`single`), as `Prefer: params=single-object` asks of any json/jsonb one.
 */
function candidates(
  overloads: Routine[],
  api: ApiRequest,
  { post, isObject, keys, raw }: GivenArguments,
): { chosen: Routine[]; single: boolean } {
  // A text, xml or bytes body goes whole to the one unnamed parameter of its type, as in PostgREST.
  if (raw !== undefined) {
    const takes = (p: RoutineParam | undefined) => p?.name === '' && !p.isArray && p.baseType === raw;
    return { chosen: overloads.filter((r) => takes(onlyParam(r))), single: false };
  }
  if (post && api.preferences.params === 'single-object')
    return { chosen: overloads.filter((r) => isJson(onlyParam(r))), single: true };
  const named =
    isObject || !post
      ? overloads.filter(
          (r) =>
            r.params.every((p) => p.name !== '') &&
            r.params.every((p) => !p.required || keys.includes(p.name)) &&
            keys.every((k) => r.params.some((p) => p.name === k)),
        )
      : [];
  if (named.length === 0 && post)
    return { chosen: overloads.filter((r) => onlyParam(r)?.name === '' && isJson(onlyParam(r))), single: true };
  return { chosen: named, single: false };
}

/** The parameters given by name, and their values as one JSON object. */
function namedArguments(
  routine: Routine,
  api: ApiRequest,
  { post, body, bodyJson, named, keys }: GivenArguments,
): RoutineCall['args'] {
  const values: Record<string, unknown> = {};
  if (post) Object.assign(values, named);
  else {
    // A repeated key is an array for a variadic or array parameter (?v=1&v=2, PostgREST's
    // variadic form); for any other its last value counts, as in PostgREST.
    for (const [k, v] of api.routineArgs) {
      const listed = routine.params.some((p) => p.name === k && (p.variadic || p.isArray));
      values[k] = listed && v.length > 1 ? v : v.at(-1);
    }
  }
  const params = routine.params.filter((p) => keys.includes(p.name));
  // A variadic parameter given once (?v=1, or a form's v=1) is an array of that one value,
  // unless it is an array literal itself (?v={1,2}, as postgrest-js writes arrays).
  let wrapped = false;
  for (const p of params) {
    const v = values[p.name];
    if (p.variadic && !Array.isArray(v) && !(typeof v === 'string' && v.startsWith('{'))) {
      values[p.name] = [v];
      wrapped = true;
    }
  }
  // JSON text the client sent is written as it is, unless a value was wrapped above or the
  // arguments are not the whole body (an array's first object, or columns=).
  const whole = named === body;
  const json = post && bodyJson !== undefined && !wrapped && whole ? bodyJson : JSON.stringify(values);
  return { kind: 'named', params, json };
}
