// The typed plan (PostgREST's Plan): the request's names resolved against the schema cache.
// Every Relation, Column and Relationship here came from the cache; only values (filter
// operands, JSON keys) still come from the client, and they only ever become parameters.

import type { Filter, JsonStep } from '../request/types.js';
import type { Column, ComputedField, Relation, Relationship } from '../schema-cache/types.js';

/** A column or computed field of a node's row, with an optional JSON path and cast. */
export interface FieldExpr {
  source: { kind: 'column'; column: Column } | { kind: 'computed'; fn: ComputedField };
  json: JsonStep[];
  cast?: string;
  /** The type of the whole expression, used to cast filter values. */
  typeSql: string;
  baseType: string;
  isArray: boolean;
}

export type SelectOut =
  | { kind: 'star' }
  | { kind: 'field'; expr: FieldExpr; key: string }
  | { kind: 'embed'; embed: Embed };

export type PlanCondition =
  | { kind: 'filter'; expr: FieldExpr; filter: Filter }
  | { kind: 'logic'; op: 'and' | 'or'; negate: boolean; children: PlanCondition[] }
  /** `embed=is.null` / `embed=not.is.null`: whether the embedded resource matched. */
  | { kind: 'embedNull'; embed: Embed; isNull: boolean };

export interface PlanOrder {
  expr: FieldExpr;
  /** Set when ordering by a column of a to-one embedded resource. */
  via?: Embed;
  direction?: 'asc' | 'desc';
  nulls?: 'first' | 'last';
}

export interface ReadNode {
  relation: Relation;
  /** SQL alias of this node's row (pgrst_N), unique in the statement. */
  alias: string;
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
  node: ReadNode;
  /** SQL alias of the lateral join that yields the value. */
  lateral: string;
  /** SQL alias of the junction table of a many-to-many embed. */
  junctionAlias?: string;
}
