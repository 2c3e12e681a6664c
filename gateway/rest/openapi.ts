// GET /rest/v1/: the OpenAPI description of the exposed relations and functions as the caller's
// role may use them, asked of Postgres under that role. Swagger 2.0 (what PostgREST serves, and
// so what its clients expect) describes the reads; OpenAPI 3.1 (openapi31.ts), for the tools that
// take 3.x only, the writes and rpc/* too.

import type { AuthContext } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { compile, sql, text } from '../engine/sql.js';
import { runTransaction } from '../engine/execute.js';
import { schemaCacheOf } from '../engine/gateway.js';
import type { Column } from '../engine/schema-cache/types.js';
import { defined } from '../engine/invariant.js';
import { openApi31, type Allowed, type Described } from './openapi31.js';

const JSON_TYPES: Record<string, { type: string; format?: string }> = {
  int2: { type: 'integer', format: 'int16' },
  int4: { type: 'integer', format: 'int32' },
  int8: { type: 'integer', format: 'int64' },
  float4: { type: 'number', format: 'float' },
  float8: { type: 'number', format: 'double' },
  numeric: { type: 'number' },
  bool: { type: 'boolean' },
  uuid: { type: 'string', format: 'uuid' },
  date: { type: 'string', format: 'date' },
  timestamptz: { type: 'string', format: 'date-time' },
  timestamp: { type: 'string', format: 'date-time' },
  json: { type: 'object' },
  jsonb: { type: 'object' },
};

function property(c: Column): Record<string, unknown> {
  const base = JSON_TYPES[c.baseType] ?? { type: 'string' };
  const p: Record<string, unknown> = c.isArray ? { type: 'array', items: base } : { ...base };
  p.format = c.typeDisplay;
  if (c.defaultExpr !== null) p.default = c.defaultExpr;
  if (c.description) p.description = c.description;
  return p;
}

const oidArray = (oids: number[]) => text(`{${oids.join(',')}}`);

/**
 * What the transaction's role may do with the columns of these relations: read, insert, update
 * (privileges, on a view only where it is updatable); delete the rows; and which are identity
 * columns. Columns it may do nothing with are left out.
 */
const columnPrivilegesStatement = (oids: number[]) =>
  compile(sql`SELECT c.oid::int AS oid, a.attname AS column,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT') AS read,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'INSERT') AND pg_catalog.pg_column_is_updatable(c.oid, a.attnum, false) AS insert,
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'UPDATE') AND pg_catalog.pg_column_is_updatable(c.oid, a.attnum, false) AS update,
       pg_catalog.has_table_privilege(c.oid, 'DELETE') AND pg_catalog.pg_relation_is_updatable(c.oid, false) & 16 = 16 AS delete,
       a.attidentity <> '' AS identity
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.oid = ANY(${oidArray(oids)}::oid[])
   AND pg_catalog.has_any_column_privilege(c.oid, 'SELECT, INSERT, UPDATE')`);

/** The functions of these the transaction's role may execute. */
const executableStatement = (oids: number[]) =>
  compile(sql`SELECT p.oid::int AS oid FROM pg_catalog.pg_proc p
 WHERE p.oid = ANY(${oidArray(oids)}::oid[]) AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')`);

/** The relations and functions of `schema` with what the caller's role may do with them. */
async function describe(ctx: AppContext, auth: AuthContext, schema: string): Promise<Described> {
  const cache = await schemaCacheOf(ctx).get();
  const relations = [...cache.relations.values()]
    .filter((r) => r.schema === schema && r.kind !== 'composite')
    .sort((a, b) => a.name.localeCompare(b.name));
  const routines = [...cache.routines.values()].flat().filter((r) => r.schema === schema);
  const [columns, executable] = await runTransaction(
    ctx.db,
    {
      readOnly: true,
      auth,
      anonRole: ctx.config.anonRole,
      readOnlyRoles: ctx.config.readOnlyRoles,
      preRequest: ctx.config.preRequest,
      statementTimeoutMs: ctx.config.statementTimeoutMs,
      tenantClaim: ctx.config.tenantClaim,
      write: false,
    },
    [columnPrivilegesStatement(relations.map((r) => r.oid)), executableStatement(routines.map((r) => r.oid))],
  );
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
    schema,
    relations: relations.flatMap((relation) => {
      const a = allowed.get(relation.oid);
      return a ? [{ relation, allowed: a }] : [];
    }),
    routines: routines.filter((r) => callable.has(r.oid)),
  };
}

/** The OpenAPI description of `schema` for the caller: Swagger 2.0, or OpenAPI 3.1. */
export async function openApiDocument(
  ctx: AppContext,
  auth: AuthContext,
  schema: string,
  version: '2.0' | '3.1' = '2.0',
): Promise<Record<string, unknown>> {
  const described = await describe(ctx, auth, schema);
  return version === '3.1' ? openApi31(described) : swagger20(described);
}

/** The reads of what the role may read, as PostgREST describes them. */
function swagger20({ schema, relations }: Described): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const definitions: Record<string, unknown> = {};
  for (const { relation: rel, allowed } of relations) {
    const columns = rel.columnList.filter((c) => allowed.read.has(c.name));
    if (columns.length === 0) continue;
    definitions[rel.name] = {
      type: 'object',
      description: rel.description ?? undefined,
      required: columns.filter((c) => !c.nullable && c.defaultExpr === null).map((c) => c.name),
      properties: Object.fromEntries(columns.map((c) => [c.name, property(c)])),
    };
    paths[`/${rel.name}`] = {
      get: {
        tags: [rel.name],
        summary: rel.description ?? undefined,
        parameters: [
          { name: 'select', in: 'query', type: 'string', description: 'Columns and embedded relations to return' },
          { name: 'order', in: 'query', type: 'string', description: 'Ordering, e.g. column.desc.nullslast' },
          { name: 'limit', in: 'query', type: 'integer' },
          { name: 'offset', in: 'query', type: 'integer' },
          ...columns.map((c) => ({
            name: c.name,
            in: 'query',
            type: 'string',
            description: `Filter on ${c.name}: operator.value`,
          })),
        ],
        responses: {
          200: { description: 'OK', schema: { type: 'array', items: { $ref: `#/definitions/${rel.name}` } } },
        },
      },
    };
  }
  return {
    swagger: '2.0',
    info: {
      title: 'Tally table interface',
      version: '1.0.0',
      description: `Tables and views of schema ${schema} readable with your role`,
    },
    basePath: '/rest/v1',
    consumes: ['application/json', 'application/vnd.pgrst.object+json', 'text/csv'],
    produces: ['application/json', 'application/vnd.pgrst.object+json', 'text/csv'],
    paths,
    definitions,
  };
}
