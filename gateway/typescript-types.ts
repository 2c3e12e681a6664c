// `tally gen types`: the TypeScript `Database` type of the exposed schemas, in the shape
// Supabase's generator writes (supabase gen types typescript) and postgrest-js 2.x and
// supabase-js read with createClient<Database>(): per schema, Tables with Row, Insert, Update
// and Relationships, Views, Functions (Args, Returns, SetofOptions), Enums and CompositeTypes,
// and the PostgREST version marker. It is written from the schema cache Tally serves from, as
// one role sees it: a column or table the role may not read is not in the types.

import type { Sql } from 'postgres';
import { loadSchemaCache } from './engine/schema-cache/load.js';
import {
  readableBy,
  type Column,
  type Relation,
  type Relationship,
  type Routine,
  type SchemaCache,
} from './engine/schema-cache/index.js';

/** The PostgREST version whose features Tally serves (max-affected, spread on to-many). */
const POSTGREST_VERSION = '13';

interface TypesOptions {
  /** The database role whose view of the schema the types describe (an API role). */
  role: string;
  /** The functions (oids) the role may execute; the others are not in the types. */
  executable: Set<number>;
  /** Enum types of the exposed schemas, by type name, with their labels. */
  enums: Map<string, { schema: string; name: string; labels: string[] }>;
}

const NUMBER = new Set([
  'int2',
  'int4',
  'int8',
  'float4',
  'float8',
  'numeric',
  'oid',
  'smallint',
  'integer',
  'bigint',
  'real',
  'double precision',
]);
const BOOLEAN = new Set(['bool', 'boolean']);
const JSON_TYPES = new Set(['json', 'jsonb']);

const quote = (s: string): string => JSON.stringify(s);

/** The TypeScript type of a Postgres base type (domains already resolved by the schema cache). */
function tsType(baseType: string, isArray: boolean, options: TypesOptions): string {
  // The schema cache names an array by its element type (isArray), a domain by its base type.
  const base = baseType;
  const enumType = options.enums.get(base);
  const scalar = enumType
    ? enumType.labels.map(quote).join(' | ') || 'never'
    : NUMBER.has(base)
      ? 'number'
      : BOOLEAN.has(base)
        ? 'boolean'
        : JSON_TYPES.has(base)
          ? 'Json'
          : base === 'void'
            ? 'undefined'
            : base === 'record'
              ? 'Record<string, unknown>'
              : 'string';
  return isArray ? (scalar.includes(' | ') ? `(${scalar})[]` : `${scalar}[]`) : scalar;
}

const columnType = (c: Column, options: TypesOptions): string =>
  tsType(c.baseType, c.isArray, options) + (c.nullable ? ' | null' : '');

/** The object type of fields `lines`, indented under `indent`; `{}` spelled as Supabase's generator spells it. */
function objectType(lines: string[], indent: string, empty = '[_ in never]: never'): string {
  const body = lines.length > 0 ? lines : [empty];
  return `{\n${body.map((l) => `${indent}  ${l}`).join('\n')}\n${indent}}`;
}

function rowFields(rel: Relation, options: TypesOptions): string[] {
  const fields = rel.columnList
    .filter((c) => readableBy(options.role, c))
    .map((c) => `${quote(c.name)}: ${columnType(c, options)}`);
  // Computed fields are selectable like columns, and may be null (a function of the row).
  for (const fn of [...rel.computed.values()].sort((a, b) => a.name.localeCompare(b.name)))
    fields.push(`${quote(fn.name)}: ${tsType(fn.baseType, fn.isArray, options)} | null`);
  return fields;
}

function writeFields(rel: Relation, options: TypesOptions, insert: boolean): string[] {
  return rel.columnList
    .filter((c) => readableBy(options.role, c))
    .map((c) => {
      if (c.generated) return `${quote(c.name)}?: never`;
      const optional = !insert || c.nullable || c.defaultExpr !== null;
      return `${quote(c.name)}${optional ? '?' : ''}: ${columnType(c, options)}`;
    });
}

/** The foreign keys from `rel` (many-to-one and one-to-one), as Supabase's Relationships list them. */
function relationshipsOf(cache: SchemaCache, rel: Relation, options: TypesOptions, indent: string): string {
  const visible = (r: Relation) => r.columnList.some((c) => readableBy(options.role, c));
  const own = (cache.relationships.get(rel.oid) ?? [])
    .filter(
      (r: Relationship) =>
        (r.cardinality === 'm2o' || r.cardinality === 'o2o') &&
        !r.computed &&
        !r.junction &&
        r.target.schema === rel.schema &&
        r.target.kind !== 'composite' &&
        !r.reverse &&
        visible(r.target),
    )
    .sort(
      (a, b) =>
        a.constraint.localeCompare(b.constraint) ||
        a.target.name.localeCompare(b.target.name) ||
        JSON.stringify(a.targetColumns).localeCompare(JSON.stringify(b.targetColumns)),
    );
  const seen = new Set<string>();
  const items: string[] = [];
  for (const r of own) {
    const key = `${r.constraint}|${r.target.name}|${r.sourceColumns.join(',')}`;
    if (seen.has(key)) continue;
    seen.add(key);
    items.push(
      `{\n${indent}    foreignKeyName: ${quote(r.constraint)}\n${indent}    columns: ${JSON.stringify(r.sourceColumns)}\n` +
        `${indent}    isOneToOne: ${r.cardinality === 'o2o'}\n${indent}    referencedRelation: ${quote(r.target.name)}\n` +
        `${indent}    referencedColumns: ${JSON.stringify(r.targetColumns)}\n${indent}  }`,
    );
  }
  return items.length === 0 ? '[]' : `[\n${items.map((i) => `${indent}  ${i}`).join(',\n')}\n${indent}]`;
}

function functionType(name: string, overloads: Routine[], options: TypesOptions, indent: string): string {
  const args = overloads
    .map((fn) => {
      const named = fn.params.filter((p) => p.name !== '');
      if (named.length === 0) return 'Record<PropertyKey, never>';
      return `{ ${named
        .map((p) => `${quote(p.name)}${p.required ? '' : '?'}: ${tsType(p.baseType, p.isArray, options)}`)
        .join('; ')} }`;
    })
    .join(' | ');
  const fn = overloads[0]!;
  let returns: string;
  let setof = '';
  if (fn.returns.kind === 'composite' && fn.returns.relation) {
    const rel = fn.returns.relation;
    returns = objectType(
      rel.columnList.map((c) => `${quote(c.name)}: ${columnType(c, options)}`),
      `${indent}  `,
    );
    if (rel.kind !== 'composite')
      setof = `\n${indent}  SetofOptions: {\n${indent}    from: "*"\n${indent}    to: ${quote(rel.name)}\n${indent}    isOneToOne: ${!fn.returns.setOf}\n${indent}    isSetofReturn: ${fn.returns.setOf}\n${indent}  }`;
  } else if (fn.returns.kind === 'void') returns = 'undefined';
  else if (fn.returns.scalar) returns = tsType(fn.returns.scalar.baseType, fn.returns.scalar.isArray, options);
  else returns = 'Json';
  if (fn.returns.setOf) returns = `${returns}[]`;
  return `${quote(name)}: {\n${indent}  Args: ${args}\n${indent}  Returns: ${returns}${setof}\n${indent}}`;
}

/** The `Database` type (and Supabase's helper types) for `cache` as `options.role` sees it. */
function typescriptTypes(cache: SchemaCache, options: TypesOptions): string {
  const schemas = [...cache.schemas].sort();
  const blocks = schemas.map((schema) => {
    const i = '      ';
    const rels = [...cache.relations.values()]
      .filter((r) => r.schema === schema && r.kind !== 'composite')
      .filter((r) => r.columnList.some((c) => readableBy(options.role, c)))
      .sort((a, b) => a.name.localeCompare(b.name));
    const table = (r: Relation) =>
      `${quote(r.name)}: {\n${i}  Row: ${objectType(rowFields(r, options), `${i}  `)}\n` +
      `${i}  Insert: ${objectType(writeFields(r, options, true), `${i}  `)}\n` +
      `${i}  Update: ${objectType(writeFields(r, options, false), `${i}  `)}\n` +
      `${i}  Relationships: ${relationshipsOf(cache, r, options, `${i}  `)}\n${i}}`;
    const view = (r: Relation) =>
      `${quote(r.name)}: {\n${i}  Row: ${objectType(rowFields(r, options), `${i}  `)}\n` +
      `${i}  Relationships: ${relationshipsOf(cache, r, options, `${i}  `)}\n${i}}`;
    const functions = [...cache.routines.entries()]
      .map(([key, fns]) => [key, fns.filter((f) => options.executable.has(f.oid))] as const)
      .filter(([key, fns]) => key.startsWith(`${schema}.`) && fns.length > 0)
      // Functions with unnamed arguments (other than one) cannot be called with an object.
      .filter(([, fns]) => fns.some((f) => f.params.every((p) => p.name !== '') || f.params.length === 1))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, fns]) => functionType(key.slice(schema.length + 1), fns, options, i));
    const enums = [...options.enums.values()]
      .filter((e) => e.schema === schema)
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((e) => `${quote(e.name)}: ${e.labels.map(quote).join(' | ') || 'never'}`);
    const composites = [...cache.relations.values()]
      .filter((r) => r.schema === schema && r.kind === 'composite' && !r.name.includes('('))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map(
        (r) =>
          `${quote(r.name)}: ${objectType(
            r.columnList.map((c) => `${quote(c.name)}: ${tsType(c.baseType, c.isArray, options)} | null`),
            i,
          )}`,
      );
    const section = (name: string, items: string[]) => `    ${name}: ${objectType(items, '    ')}`;
    return `  ${quote(schema)}: {\n${[
      section('Tables', rels.filter((r) => r.kind === 'table').map(table)),
      section('Views', rels.filter((r) => r.kind === 'view').map(view)),
      section('Functions', functions),
      section('Enums', enums),
      section('CompositeTypes', composites),
    ].join('\n')}\n  }`;
  });
  const defaultSchema = schemas.includes('public') ? 'public' : schemas[0]!;
  return `// Generated by \`tally gen types\` as ${options.role} sees the schema. Do not edit.

export type Json = string | number | boolean | null | { [key: string]: Json | undefined } | Json[]

export type Database = {
  // The PostgREST version whose features the server has (createClient<Database> reads it).
  __InternalSupabase: {
    PostgrestVersion: ${quote(POSTGREST_VERSION)}
  }
${blocks.join('\n')}
}

type DatabaseWithoutInternals = Omit<Database, "__InternalSupabase">
type DefaultSchema = DatabaseWithoutInternals[${quote(defaultSchema)}]

export type Tables<T extends keyof (DefaultSchema["Tables"] & DefaultSchema["Views"])> =
  (DefaultSchema["Tables"] & DefaultSchema["Views"])[T] extends { Row: infer R } ? R : never
export type TablesInsert<T extends keyof DefaultSchema["Tables"]> = DefaultSchema["Tables"][T]["Insert"]
export type TablesUpdate<T extends keyof DefaultSchema["Tables"]> = DefaultSchema["Tables"][T]["Update"]
export type Enums<T extends keyof DefaultSchema["Enums"]> = DefaultSchema["Enums"][T]
export type CompositeTypes<T extends keyof DefaultSchema["CompositeTypes"]> = DefaultSchema["CompositeTypes"][T]
`;
}

/** The enum types of `schemas`, with their labels in order. */
async function loadEnums(db: Sql, schemas: string[]): Promise<TypesOptions['enums']> {
  const rows = await db<{ schema: string; name: string; labels: string[] }[]>`
    SELECT n.nspname AS schema, t.typname AS name, array_agg(e.enumlabel::text ORDER BY e.enumsortorder) AS labels
      FROM pg_catalog.pg_type t
      JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
      JOIN pg_catalog.pg_enum e ON e.enumtypid = t.oid
     WHERE n.nspname = ANY (${schemas})
     GROUP BY n.nspname, t.typname`;
  return new Map(rows.map((r) => [r.name, r]));
}

/**
 * The types of the database `db` reaches, for its exposed `schemas`, as `role` sees them; with a
 * tenant column, without what the server withholds (engine/schema-cache/isolation.ts).
 */
export async function generateTypes(
  db: Sql,
  schemas: string[],
  role: string,
  tenantColumn: string | undefined,
): Promise<string> {
  const cache = await loadSchemaCache(db, schemas, tenantColumn);
  const oids = [...cache.routines.values()].flat().map((f) => f.oid);
  const executable = await db<{ oid: number }[]>`
    SELECT f.oid::int AS oid FROM unnest(${oids}::oid[]) AS f (oid)
     WHERE pg_catalog.has_function_privilege(${role}, f.oid, 'EXECUTE')`;
  return typescriptTypes(cache, {
    role,
    executable: new Set(executable.map((r) => r.oid)),
    enums: await loadEnums(db, schemas),
  });
}
