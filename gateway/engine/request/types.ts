// The parsed request (PostgREST's ApiRequest): what the client asked for, in PostgREST's
// grammar, before any name was checked against the schema cache. Names here are untrusted.

import type { IsKeyword, Operator } from '../operators.js';

export interface JsonStep {
  arrow: '->' | '->>';
  key: string;
  /** An array index (`->-1`, `->0`): digits written bare; a quoted key (`->"0"`) is an object's key. */
  index?: true;
}

/** A column (or computed field) of the current relation, optionally followed by a JSON path. */
export interface FieldRef {
  name: string;
  json: JsonStep[];
}

export type AggregateFn = 'count' | 'sum' | 'avg' | 'min' | 'max';

export type SelectItem =
  | { kind: 'star' }
  /** `[alias:]field[->json][::inputCast][.aggregate()[::outputCast]]` */
  | { kind: 'field'; field: FieldRef; alias?: string; cast?: string; aggregate?: AggregateFn; aggregateCast?: string }
  /** `[alias:]count()[::cast]`: the rows of each group. */
  | { kind: 'count'; alias?: string; cast?: string }
  /** `[alias:]relation[!hint][!inner](…)`; `...relation(…)` spreads its columns into the parent. */
  | {
      kind: 'embed';
      name: string;
      alias?: string;
      hint?: string;
      inner: boolean;
      spread: boolean;
      select: SelectItem[];
    };

/**
 * PostgREST's reserved query keys, and `apikey`, which some clients repeat in the query string:
 * never a filter, nor an argument of a GET /rpc call. A `node` key may follow an embedded path
 * (`child.order=…`); a `request` key names the whole request. The parser has a reader for each
 * (a key without one does not type-check).
 */
export const RESERVED_KEYS = {
  select: 'request',
  columns: 'request',
  on_conflict: 'request',
  apikey: 'request',
  order: 'node',
  limit: 'node',
  offset: 'node',
  or: 'node',
  and: 'node',
} as const;
export type ReservedKey = keyof typeof RESERVED_KEYS;
export type ReservedKeyOf<Scope> = {
  [K in ReservedKey]: (typeof RESERVED_KEYS)[K] extends Scope ? K : never;
}[ReservedKey];
export const isReservedKey = (key: string): key is ReservedKey => Object.hasOwn(RESERVED_KEYS, key);

export type FilterValue =
  | { kind: 'scalar'; text: string }
  | { kind: 'list'; items: string[] }
  | { kind: 'is'; value: IsKeyword }
  | { kind: 'fts'; language?: string; text: string };

export interface Filter {
  field: FieldRef;
  negate: boolean;
  /** One of the operators of ../operators.ts, which gives each its grammar and its SQL. */
  op: Operator;
  quantifier?: 'any' | 'all';
  value: FilterValue;
}

export type Condition =
  { kind: 'filter'; filter: Filter } | { kind: 'logic'; op: 'and' | 'or'; negate: boolean; children: Condition[] };

export interface OrderTerm {
  /** Set for `order=rel(col)`: a column of a to-one embedded resource. */
  relation?: string;
  field: FieldRef;
  direction?: 'asc' | 'desc';
  nulls?: 'first' | 'last';
}

/** Options of one node of the select tree: the root ('') or an embedded path ('a.b'). */
export interface NodeOptions {
  conditions: Condition[];
  order?: OrderTerm[];
  limit?: number;
  offset?: number;
}

export interface Preferences {
  return?: 'minimal' | 'headers-only' | 'representation';
  count?: 'exact' | 'planned' | 'estimated';
  resolution?: 'merge-duplicates' | 'ignore-duplicates';
  missing?: 'default' | 'null';
  handling?: 'strict' | 'lenient';
  maxAffected?: number;
  tx?: 'commit' | 'rollback';
  /** params=single-object: the whole body is the one json/jsonb argument of a function. */
  params?: 'single-object';
  /** Preferences that were understood, as they will be echoed in Preference-Applied. */
  understood: string[];
  invalid: string[];
}

export type MediaType = 'json' | 'object' | 'csv' | 'geojson';

/** How a body is written: its media type, and whether null fields are left out (`;nulls=stripped`). */
export interface Output {
  media: MediaType;
  stripNulls: boolean;
}

export const PLAN_OPTIONS = ['analyze', 'verbose', 'settings', 'buffers', 'wal'] as const;
export type PlanOption = (typeof PLAN_OPTIONS)[number];

/** Accept: application/vnd.pgrst.plan[+json|+text]; for="…"; options=a|b: EXPLAIN instead of rows. */
export interface PlanMedia {
  format: 'json' | 'text';
  /** The media type whose query is explained (for="…"), json by default. */
  for: MediaType;
  options: PlanOption[];
}

export interface RangeRequest {
  offset: number;
  /** Number of rows; undefined for no limit. */
  limit?: number;
}

export interface ApiRequest {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  schema: string;
  /** A table or view; for a function call, the function's name (see `routine`). */
  relation: string;
  /** Set for /rpc/{function}: the function's name as the client wrote it. */
  routine?: string;
  /** GET /rpc arguments: query parameters named like a parameter of the function (repeats kept). */
  routineArgs: Map<string, string[]>;
  select: SelectItem[];
  /** Whether the client sent `select` (a write returns everything when it did not). */
  selectGiven: boolean;
  nodes: Map<string, NodeOptions>;
  range: RangeRequest;
  preferences: Preferences;
  accept: MediaType;
  /** `application/vnd.pgrst.array+json;nulls=stripped` (or object): fields that are null are left out. */
  stripNulls: boolean;
  /** Set when the client asked for the query plan instead of the result. */
  plan?: PlanMedia;
  onConflict?: string[];
  columns?: string[];
}
