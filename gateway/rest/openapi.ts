// GET /rest/v1/: the OpenAPI description of the exposed relations and functions as the caller's
// role may use them, asked of Postgres under that role by the gateway call (the root's plan). Swagger 2.0 (what PostgREST serves, and
// so what its clients expect) describes the reads; OpenAPI 3.1 (openapi31.ts), for the tools that
// take 3.x only, the writes and rpc/* too.

import type { DescribeSchema, Described } from '../engine/response/index.js';
import type { Column } from '../engine/schema-cache/types.js';
import { openApi31 } from './openapi31.js';

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

/** The root's Accept for OpenAPI 3.1: the OpenAPI Initiative's media type. */
const OPENAPI_31 = /(^|,)\s*application\/vnd\.oai\.openapi\+json\s*(;|,|$)/i;

/**
 * The root's answer (GatewayOptions.describe): the schema as the caller's role may use it, which
 * the gateway call asked of Postgres in the caller's transaction, as Swagger 2.0, or as OpenAPI
 * 3.1 when Accept asks for the OpenAPI Initiative's media type. Anything else gets Swagger 2.0,
 * which PostgREST serves there and its clients read.
 */
export const describeSchema: DescribeSchema = (described, accept) => {
  const v31 = OPENAPI_31.test(accept ?? '');
  return {
    status: 200,
    headers: {
      'Content-Type': v31 ? 'application/vnd.oai.openapi+json; version=3.1' : 'application/openapi+json; charset=utf-8',
      Vary: 'Accept',
    },
    body: JSON.stringify(v31 ? openApi31(described) : swagger20(described)),
  };
};

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
