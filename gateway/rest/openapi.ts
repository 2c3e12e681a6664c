// GET /rest/v1/: an OpenAPI (Swagger 2.0, as PostgREST serves) description of the exposed
// relations and the columns the caller's role may read, asked of Postgres under that role.

import type { AuthContext } from '../engine/call.js';
import type { AppContext } from '../context.js';
import { compile, sql, text } from '../engine/sql.js';
import { runTransaction } from '../engine/execute.js';
import { schemaCacheOf } from '../engine/gateway.js';
import type { Column } from '../engine/schema-cache/types.js';
import { defined } from '../engine/invariant.js';

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

/** The columns of these relations the transaction's role may read (oids as one array literal). */
const readableColumnsStatement = (oids: number[]) =>
  compile(sql`SELECT c.oid::int AS oid, a.attname AS column
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.oid = ANY(${text(`{${oids.join(',')}}`)}::oid[]) AND pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')`);

export async function openApiDocument(
  ctx: AppContext,
  auth: AuthContext,
  schema: string,
): Promise<Record<string, unknown>> {
  const cache = await schemaCacheOf(ctx).get();
  const relations = [...cache.relations.values()].filter((r) => r.schema === schema);
  const results = await runTransaction(
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
    [readableColumnsStatement(relations.map((r) => r.oid))],
  );
  const readable = new Map<number, Set<string>>();
  for (const r of defined(results[0], 'the readable columns')) {
    if (!readable.has(r.oid as number)) readable.set(r.oid as number, new Set());
    readable.get(r.oid as number)!.add(r.column as string);
  }
  const paths: Record<string, unknown> = {};
  const definitions: Record<string, unknown> = {};
  for (const rel of relations.sort((a, b) => a.name.localeCompare(b.name))) {
    const cols = readable.get(rel.oid);
    if (!cols) continue;
    const columns = rel.columnList.filter((c) => cols.has(c.name));
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
