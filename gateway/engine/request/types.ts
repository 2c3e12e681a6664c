// The parsed request (PostgREST's ApiRequest): what the client asked for, in PostgREST's
// grammar, before any name was checked against the schema cache. Names here are untrusted.

export interface JsonStep {
  arrow: '->' | '->>';
  key: string;
}

/** A column (or computed field) of the current relation, optionally followed by a JSON path. */
export interface FieldRef {
  name: string;
  json: JsonStep[];
}

export const AGGREGATES = ['count', 'sum', 'avg', 'min', 'max'] as const;
export type AggregateFn = (typeof AGGREGATES)[number];

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

export const OPERATORS = [
  'eq',
  'neq',
  'gt',
  'gte',
  'lt',
  'lte',
  'like',
  'ilike',
  'match',
  'imatch',
  'in',
  'is',
  'isdistinct',
  'fts',
  'plfts',
  'phfts',
  'wfts',
  'cs',
  'cd',
  'ov',
  'sl',
  'sr',
  'nxr',
  'nxl',
  'adj',
] as const;
export type Operator = (typeof OPERATORS)[number];

export type FilterValue =
  | { kind: 'scalar'; text: string }
  | { kind: 'list'; items: string[] }
  | { kind: 'is'; value: 'null' | 'not_null' | 'true' | 'false' | 'unknown' }
  | { kind: 'fts'; language?: string; text: string };

export interface Filter {
  field: FieldRef;
  negate: boolean;
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

export type MediaType = 'json' | 'object' | 'csv';

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
  /** Set when the client asked for the query plan instead of the result. */
  plan?: PlanMedia;
  onConflict?: string[];
  columns?: string[];
}
