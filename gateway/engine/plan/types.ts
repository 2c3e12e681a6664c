// The typed plan (PostgREST's Plan): the request's names resolved against the schema cache.
// Every Relation, Column and Relationship here came from the cache; only values (filter
// operands, JSON keys) still come from the client, and they only ever become parameters.

import type { CatalogText } from '../sql.js';
import type { AggregateFn, Filter, JsonStep } from '../request/types.js';
import type { Column, ComputedField, Relation, Relationship, Routine, RoutineParam } from '../schema-cache/types.js';

/** A column or computed field of a node's row, with an optional JSON path and cast. */
export interface FieldExpr {
  source: { kind: 'column'; column: Column } | { kind: 'computed'; fn: ComputedField };
  json: JsonStep[];
  /** The cast's target type, resolved against the schema cache's types (never the client's text). */
  cast?: CatalogText;
  /** The type of the whole expression, used to cast filter values. */
  typeSql: CatalogText;
  baseType: string;
  isArray: boolean;
}

/** An aggregate over a node's rows; `cast` (SQL type from the cache) applies to its result. */
export interface Aggregate {
  fn: AggregateFn;
  cast?: CatalogText;
}

export type SelectOut =
  | { kind: 'star' }
  | { kind: 'field'; expr: FieldExpr; key: string; aggregate?: Aggregate }
  /** count() without a column: the rows of the group. */
  | { kind: 'count'; key: string; cast?: CatalogText }
  | { kind: 'embed'; embed: Embed };

export type PlanCondition =
  | { kind: 'filter'; expr: FieldExpr; filter: Filter }
  | { kind: 'logic'; op: 'and' | 'or'; negate: boolean; children: PlanCondition[] }
  /** `embed=is.null` / `embed=not.is.null`: whether the embedded resource matched. */
  | { kind: 'embedNull'; embed: Embed; isNull: boolean };

export type PlanOrder = {
  direction?: 'asc' | 'desc';
  nulls?: 'first' | 'last';
} &
  /** A field of the node's row, or with `via`, of a to-one embedded resource's row. */
  (
    | { kind: 'field'; expr: FieldExpr; via?: Embed }
    /**
     * A column a to-one spread embed lifts into the node, by its key (alias included): the
     * column of the embed's lateral join, as PostgREST orders by a related output. A node that
     * groups by that column can order by it; a sub-select through the relationship would read
     * the node's ungrouped row.
     */
    | { kind: 'lifted'; embed: Embed; key: string }
  );

export interface ReadNode {
  relation: Relation;
  /** SQL alias of this node's row (pgrst_N), unique in the statement. */
  alias: string;
  /**
   * The relation's tenant column and the claim it is compared with (EngineConfig.tenant), when
   * it has that column and the caller that claim: the statement says which tenant it reads, so
   * that a sharded database (Citus) sends it to that tenant's shard only. RLS still decides.
   */
  tenant?: { column: Column; claim: string };
  select: SelectOut[];
  conditions: PlanCondition[];
  order: PlanOrder[];
  limit?: number;
  offset?: number;
  embeds: Embed[];
}

export interface Embed {
  /** The JSON key of the embedded value (alias or the name as written). */
  key: string;
  relationship: Relationship;
  toOne: boolean;
  inner: boolean;
  /** `...relation(…)`: the columns are lifted into the parent (to-many: one array per column). */
  spread: boolean;
  node: ReadNode;
  /** SQL alias of the lateral join that yields the value. */
  lateral: string;
  /** SQL alias of the junction table of a many-to-many embed. */
  junctionAlias?: string;
}

/**
 * A call of a function at /rpc (PostgREST's CallPlan): the overload the arguments chose, and how
 * they reach it. Argument values travel as one JSON parameter; the SQL builder turns it into
 * typed, named arguments with the parameter types of the schema cache.
 */
export interface RoutineCall {
  routine: Routine;
  args:
    | { kind: 'named'; params: RoutineParam[]; json: string }
    /** One json/jsonb parameter receives the whole body (unnamed, or Prefer: params=single-object). */
    | { kind: 'single'; param: RoutineParam; json: string }
    /** A text/plain, text/xml or application/octet-stream body: the text of its one unnamed parameter. */
    | { kind: 'body'; param: RoutineParam; text: string };
  /** READ ONLY: GET, or a STABLE/IMMUTABLE function over POST. */
  readOnly: boolean;
}
