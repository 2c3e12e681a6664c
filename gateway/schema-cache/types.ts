// What the gateway knows about the database, loaded from pg_catalog (PostgREST's SchemaCache).
// Every identifier the SQL builder writes comes from here, never from the request.

export interface Column {
  name: string;
  /** Fully qualified type for casts of parameters: pg_catalog.int4, blog.mood, pg_catalog.text[]. */
  typeSql: string;
  /** format_type(): integer, character varying(20), … for descriptions. */
  typeDisplay: string;
  /** Name of the base type (domains resolved): text, jsonb, tsvector, int4range … */
  baseType: string;
  isArray: boolean;
  nullable: boolean;
  /** The default expression as Postgres prints it (pg_get_expr), or null. */
  defaultExpr: string | null;
  generated: boolean;
  description: string | null;
}

export interface ComputedField {
  schema: string;
  name: string;
  typeSql: string;
  baseType: string;
  isArray: boolean;
}

export interface Relation {
  oid: number;
  schema: string;
  name: string;
  kind: 'table' | 'view';
  columns: Map<string, Column>;
  columnList: Column[];
  primaryKey: string[];
  /** Unique column sets (primary key included), for one-to-one detection. */
  uniqueKeys: string[][];
  computed: Map<string, ComputedField>;
  description: string | null;
}

export type Cardinality = 'm2o' | 'o2m' | 'o2o' | 'm2m';

/**
 * A way to embed `target` from `source`. For m2o/o2m/o2o: rows of target whose `targetColumns`
 * equal the source row's `sourceColumns`. For m2m: through `junction`, whose
 * `junctionSourceColumns` equal the source's `sourceColumns` and `junctionTargetColumns` the
 * target's `targetColumns`.
 */
export interface Relationship {
  cardinality: Cardinality;
  source: Relation;
  target: Relation;
  /** The foreign key's name (m2m: the one from the junction to the target). */
  constraint: string;
  sourceColumns: string[];
  targetColumns: string[];
  junction?: {
    relation: Relation;
    sourceConstraint: string;
    junctionSourceColumns: string[];
    junctionTargetColumns: string[];
  };
}

export interface SchemaCache {
  schemas: string[];
  relations: Map<string, Relation>; // key: schema.name
  relationships: Map<number, Relationship[]>; // by source oid
  /** Type names usable in casts: name (and aliases) → qualified SQL type. */
  types: Map<string, string>;
  loadedAt: Date;
}

export const relationKey = (schema: string, name: string): string => `${schema}.${name}`;
