// What the gateway knows about the database, loaded from pg_catalog (PostgREST's SchemaCache).
// Every identifier the SQL builder writes comes from here, never from the request; so does
// every piece of catalog text (types, defaults, function names), branded by the loader.

import type { CatalogText } from '../sql.js';

export interface Column {
  name: string;
  /** Fully qualified type for casts of parameters: pg_catalog.int4, blog.mood, pg_catalog.text[]. */
  typeSql: CatalogText;
  /** format_type(): integer, character varying(20), … for descriptions. */
  typeDisplay: string;
  /** Name of the base type (domains resolved): text, jsonb, tsvector, int4range … */
  baseType: string;
  isArray: boolean;
  nullable: boolean;
  /** The default expression as Postgres prints it (pg_get_expr), or null. */
  defaultExpr: CatalogText | null;
  generated: boolean;
  /** Roles (of those the server may become) that may read this column; null: not a table's. */
  readers?: string[] | null;
  description: string | null;
  /**
   * A domain's "data representation" (PostgREST 11+): functions of casts declared on the domain
   * to json (how values are shown), from text (how filter values are read) and from json (how
   * written values are read). Qualified function names.
   */
  representation?: { toJson?: CatalogText; fromText?: CatalogText; fromJson?: CatalogText };
}

export interface ComputedField {
  schema: string;
  name: string;
  typeSql: CatalogText;
  baseType: string;
  isArray: boolean;
}

export interface Relation {
  oid: number;
  schema: string;
  name: string;
  /** composite: a composite type or a function's OUT columns, never addressable by itself. */
  kind: 'table' | 'view' | 'composite';
  /** A partitioned table: its rows live in its partitions (a write returns no system column of it). */
  partitioned?: true;
  columns: Map<string, Column>;
  columnList: Column[];
  primaryKey: string[];
  /** Unique column sets (primary key included), for one-to-one detection. */
  uniqueKeys: string[][];
  computed: Map<string, ComputedField>;
  description: string | null;
  /**
   * A relation of a schema that is not exposed, known as the row type of an exposed function's
   * argument or result (computed fields, computed relationships, /rpc results): its rows take
   * select, filters and order there, but it is no resource, and no foreign key of it is a
   * relationship (its exposed views' are).
   */
  hidden?: true;
}

type Cardinality = 'm2o' | 'o2m' | 'o2o' | 'm2m';

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
  /** Runs from the relation the foreign key references to the one that holds it. */
  reverse?: true;
  sourceColumns: string[];
  targetColumns: string[];
  /**
   * A computed relationship (PostgREST's): rows of `target` returned by a function of the
   * source's row, embedded by the function's name; no columns link them.
   */
  computed?: { schema: string; name: string };
  junction?: {
    relation: Relation;
    sourceConstraint: string;
    junctionSourceColumns: string[];
    junctionTargetColumns: string[];
  };
}

/** An input parameter of a function; unnamed ones have the name ''. */
export interface RoutineParam {
  name: string;
  typeSql: CatalogText;
  baseType: string;
  isArray: boolean;
  /** false when the parameter has a default and may be left out. */
  required: boolean;
  /** A VARIADIC parameter: passed as VARIADIC name := array. */
  variadic?: boolean;
}

/** A function of an exposed schema, callable at /rpc/{name} (PostgREST's Routine). */
export interface Routine {
  oid: number;
  schema: string;
  name: string;
  params: RoutineParam[];
  returns: {
    /** SETOF / RETURNS TABLE: an array of rows; otherwise one value. */
    setOf: boolean;
    /**
     * composite: rows of `relation` (a table, view or composite type of the exposed schemas, or
     * the function's OUT columns), so select, filters, order and embedding apply; scalar: one
     * JSON value per row; void: nothing (204).
     */
    kind: 'composite' | 'scalar' | 'void';
    relation?: Relation;
    /** A scalar result's type (not for record, or a row type of no exposed relation). */
    scalar?: { baseType: string; isArray: boolean };
  };
  volatility: 'volatile' | 'stable' | 'immutable';
  description: string | null;
}

/** Why a relation or function is not served (schema-cache/isolation.ts), for its error and the log. */
export interface Withheld {
  kind: 'table' | 'view' | 'function';
  /** What is not isolated, in a sentence that names it. */
  reason: string;
}

export interface SchemaCache {
  schemas: string[];
  relations: Map<string, Relation>; // key: schema.name
  relationships: Map<number, Relationship[]>; // by source oid
  /** Functions by schema.name; overloads share a key. */
  routines: Map<string, Routine[]>;
  /** Type names usable in casts: name (and aliases) → qualified SQL type. */
  types: Map<string, CatalogText>;
  /**
   * Relations and functions of the exposed schemas left out because they are not isolated, by
   * schema.name: a request naming one is answered why (isolation.ts), not that it does not exist.
   */
  withheld?: ReadonlyMap<string, Withheld>;
  /**
   * The database copies a SET LOCAL to the other servers a transaction reaches, and not what
   * set_config() sets (Citus, with citus.propagate_set_commands = 'local'): the claims, which
   * row-level security reads on every server, are then set with SET LOCAL (execute.ts).
   */
  propagatesSetLocal?: true;
  loadedAt: Date;
  /** The role a request runs as: errors list only the columns and relations it may read. */
  viewer?: string;
}

/** May `viewer` read `col`? (No viewer, or no privileges known: yes.) */
export const readableBy = (viewer: string | undefined, col: Column): boolean =>
  viewer === undefined || col.readers == null || col.readers.includes(viewer);

/** The columns of `rel` that `viewer` may read, for hints. */
export const readableColumns = (rel: Relation, viewer: string | undefined): string[] =>
  rel.columnList.filter((c) => readableBy(viewer, c)).map((c) => c.name);

/** A hint listing those columns, or null when the viewer may read none of them. */
export function columnsHint(rel: Relation, viewer: string | undefined): string | null {
  const names = readableColumns(rel, viewer);
  return names.length > 0 ? `The columns of ${rel.name} are: ${names.join(', ')}` : null;
}

export const relationKey = (schema: string, name: string): string => `${schema}.${name}`;

/**
 * The name a "Perhaps you meant …" hint suggests for one not found, as PostgREST's hints do: a
 * name that differs only in case, or of which one is the start of the other.
 */
export function closeName(names: Iterable<string>, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const n of names) {
    if (n !== name && (n.toLowerCase() === lower || n.startsWith(name) || name.startsWith(n))) return n;
  }
  return undefined;
}
