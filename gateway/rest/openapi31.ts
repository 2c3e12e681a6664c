// The OpenAPI 3.1 description of /rest/v1, for the tools that take 3.x only (openapi-typescript,
// openapi-fetch, most code generators): what the caller's role may do with each table, view and
// function of the schema, reads, writes and rpc/* alike. Built from the schema cache and the
// role's privileges (openapi.ts asks Postgres for those); the rows are described as a read
// with select=* returns them, so every readable column is there (null where it may be).

import type { Allowed, Described } from '../engine/response/index.js';
import { idempotencyKeyHeader } from '../fields.js';
import type { Column, Relation, Routine, RoutineParam } from '../engine/schema-cache/types.js';

type JsonSchema = Record<string, unknown>;

const VALUE_TYPES: Record<string, JsonSchema> = {
  int2: { type: 'integer' },
  int4: { type: 'integer', format: 'int32' },
  int8: { type: 'integer', format: 'int64' },
  float4: { type: 'number', format: 'float' },
  float8: { type: 'number', format: 'double' },
  numeric: { type: 'number' },
  bool: { type: 'boolean' },
  uuid: { type: 'string', format: 'uuid' },
  date: { type: 'string', format: 'date' },
  timestamptz: { type: 'string', format: 'date-time' },
  json: {},
  jsonb: {},
};

/** The JSON Schema of a value of this type as /rest/v1 writes it; any JSON for json and jsonb. */
function valueSchema(type: { baseType: string; isArray: boolean }, nullable: boolean): JsonSchema {
  const base = VALUE_TYPES[type.baseType] ?? { type: 'string' };
  const value: JsonSchema = type.isArray ? { type: 'array', items: base } : { ...base };
  if (nullable && typeof value.type === 'string') value.type = [value.type, 'null'];
  return value;
}

function columnSchema(c: Column): JsonSchema {
  return { ...valueSchema(c, c.nullable), ...(c.description ? { description: c.description } : {}) };
}

/**
 * A component name for a relation: OpenAPI allows only [A-Za-z0-9._-] there, so any other
 * character, and `.` and `-` themselves, become -hex-; `.` then joins the name and its kind.
 */
const componentName = (name: string): string =>
  name.replace(/[^A-Za-z0-9_]/gu, (c) => `-${c.codePointAt(0)!.toString(16)}-`);

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/**
 * An operation's id, unique in the document: the method, then the component name of the
 * relation, or `rpc` and the function's (componentName leaves no dot in a name).
 */
const operationId = (method: string, name: string, rpc = false): string =>
  rpc ? `${method}.rpc.${componentName(name)}` : `${method}.${name}`;
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });
// The error shape's component: a relation's name has no dot there (componentName), and its
// own components end in .insert or .update.
const ERROR = 'tally.error';
const ERROR_SCHEMA = {
  type: 'object',
  properties: {
    code: { type: 'string' },
    message: { type: 'string' },
    details: { type: ['string', 'null'] },
    hint: { type: ['string', 'null'] },
  },
  required: ['code', 'message', 'details', 'hint'],
};
const ERROR_RESPONSE = { $ref: '#/components/responses/error' };
// A request's errors (4XX), and any other (a 5XX), in the one shape.
const ERRORS = { '4XX': ERROR_RESPONSE, default: ERROR_RESPONSE };

const query = (name: string, description: string, schema: JsonSchema = { type: 'string' }) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema,
});

const prefer = (description: string) => ({
  name: 'Prefer',
  in: 'header',
  required: false,
  description,
  schema: { type: 'string' },
});

const SELECT = query('select', 'Columns and embedded relations to return, e.g. id,name,funds(name)');

/** One filter per readable column, and the logical ones: the rows a read, change or delete takes. */
const filters = (columns: string[]) => [
  ...columns.map((c) => query(c, `Filter on ${c}: operator.value, e.g. eq.5, in.(1,2), is.null, ilike.*x*`)),
  query('or', 'Filters of which any may hold: (a.eq.1,b.gt.2)'),
  query('and', 'Filters that must all hold: (a.eq.1,b.gt.2)'),
];

const RETURNED = 'With Prefer: return=representation, the rows as changed; without it, no body (204)';
const INSERTED = 'The rows inserted: in the body with Prefer: return=representation, else none';

function relationPaths(relation: Relation, allowed: Allowed, name: string): Record<string, unknown> {
  const readable = relation.columnList.filter((c) => allowed.read.has(c.name)).map((c) => c.name);
  // The rows a write returns, where the role may read them (a role that may only insert gets none).
  const rows = { type: 'array', items: ref(name) };
  const written = readable.length > 0 ? { content: json(rows) } : {};
  const returned = { 200: { description: RETURNED, ...written }, 204: { description: 'Done' }, ...ERRORS };
  const tags = [relation.name];
  const path: Record<string, unknown> = {};
  if (readable.length > 0) {
    path.get = {
      operationId: operationId('get', name),
      tags,
      summary: relation.description ?? `Read ${relation.name}`,
      parameters: [
        SELECT,
        query('order', 'Ordering, e.g. name.asc,id.desc.nullslast'),
        query('limit', 'At most this many rows', { type: 'integer', minimum: 0 }),
        query('offset', 'Skip this many rows', { type: 'integer', minimum: 0 }),
        ...filters(readable),
        prefer('count=exact (or planned, estimated) adds the total to Content-Range'),
      ],
      responses: {
        200: { description: 'The rows', content: json(rows) },
        206: { description: 'A partial range of the rows', content: json(rows) },
        ...ERRORS,
      },
    };
  }
  if (allowed.insert.size > 0) {
    path.post = {
      operationId: operationId('post', name),
      tags,
      summary: `Insert into ${relation.name}`,
      parameters: [
        SELECT,
        query('on_conflict', 'The unique columns an upsert matches on (with Prefer: resolution=…)'),
        query('columns', 'The only keys of the body to insert, e.g. name,amount'),
        prefer('return=representation|minimal, resolution=merge-duplicates|ignore-duplicates, missing=default'),
        idempotencyKeyHeader(),
      ],
      requestBody: {
        required: true,
        content: json({ oneOf: [ref(`${name}.insert`), { type: 'array', items: ref(`${name}.insert`) }] }),
      },
      responses: {
        201: { description: INSERTED, ...written },
        ...ERRORS,
      },
    };
  }
  if (allowed.update.size > 0) {
    path.patch = {
      operationId: operationId('patch', name),
      tags,
      summary: `Change the rows of ${relation.name} the filters take`,
      parameters: [SELECT, ...filters(readable), prefer('return=representation|minimal, count=exact')],
      requestBody: { required: true, content: json(ref(`${name}.update`)) },
      responses: returned,
    };
  }
  if (allowed.delete) {
    path.delete = {
      operationId: operationId('delete', name),
      tags,
      summary: `Delete the rows of ${relation.name} the filters take`,
      parameters: [SELECT, ...filters(readable), prefer('return=representation|minimal, count=exact')],
      responses: returned,
    };
  }
  return path;
}

/** The row, insert and update schemas of a relation, as far as the role may use each. */
function relationSchemas(relation: Relation, allowed: Allowed, name: string): Record<string, JsonSchema> {
  const schemas: Record<string, JsonSchema> = {};
  const readable = relation.columnList.filter((c) => allowed.read.has(c.name));
  if (readable.length > 0) {
    schemas[name] = {
      type: 'object',
      ...(relation.description ? { description: relation.description } : {}),
      properties: Object.fromEntries(readable.map((c) => [c.name, columnSchema(c)])),
      required: readable.map((c) => c.name),
    };
  }
  const writable = (set: Set<string>) => relation.columnList.filter((c) => set.has(c.name) && !c.generated);
  const insertable = writable(allowed.insert);
  if (insertable.length > 0) {
    schemas[`${name}.insert`] = {
      type: 'object',
      properties: Object.fromEntries(insertable.map((c) => [c.name, columnSchema(c)])),
      required: insertable
        .filter((c) => !c.nullable && c.defaultExpr === null && !allowed.identity.has(c.name))
        .map((c) => c.name),
      additionalProperties: false,
    };
  }
  const updatable = writable(allowed.update);
  if (updatable.length > 0) {
    schemas[`${name}.update`] = {
      type: 'object',
      properties: Object.fromEntries(updatable.map((c) => [c.name, columnSchema(c)])),
      additionalProperties: false,
    };
  }
  return schemas;
}

/** What a call of the function answers, by what it returns (a described relation by reference). */
function resultSchema(routine: Routine, described: Map<Relation, string>): JsonSchema | undefined {
  const { kind, relation, setOf } = routine.returns;
  if (kind === 'void') return undefined;
  let one: JsonSchema;
  if (kind === 'composite' && relation) {
    const name = described.get(relation);
    one = name
      ? ref(name)
      : {
          type: 'object',
          properties: Object.fromEntries(relation.columnList.map((c) => [c.name, columnSchema(c)])),
          required: relation.columnList.map((c) => c.name),
        };
  } else {
    // A value of its type, or NULL; any JSON where the type is not known (record).
    one = routine.returns.scalar ? valueSchema(routine.returns.scalar, true) : {};
  }
  return setOf ? { type: 'array', items: one } : one;
}

const named = (r: Routine): RoutineParam[] => r.params.filter((p) => p.name !== '');

/** The body of a POST to rpc/{name}: an object of its named arguments (one per overload), or any JSON. */
function argumentsSchema(overloads: Routine[], rows: Map<string, string>): JsonSchema {
  // A row of a described table (a computed field's argument) is its row object; any other, a value.
  const argument = (p: RoutineParam): JsonSchema => {
    const row = rows.get(p.baseType);
    return row && !p.isArray ? { oneOf: [ref(row), { type: 'null' }] } : valueSchema(p, true);
  };
  const one = (r: Routine): JsonSchema =>
    r.params.length === 1 && r.params[0]!.name === ''
      ? {}
      : {
          type: 'object',
          properties: Object.fromEntries(named(r).map((p) => [p.name, argument(p)])),
          required: named(r)
            .filter((p) => p.required)
            .map((p) => p.name),
          additionalProperties: false,
        };
  return overloads.length === 1 ? one(overloads[0]!) : { oneOf: overloads.map(one) };
}

function routinePath(overloads: Routine[], described: Map<Relation, string>): Record<string, unknown> {
  const rows = new Map([...described].map(([relation, name]) => [relation.name, name]));
  const [first] = overloads;
  const summary = first!.description ?? `Call ${first!.name}`;
  const results = overloads.map((r) => resultSchema(r, described));
  const answer = results.every((s) => s === undefined)
    ? { 204: { description: 'Done (the function returns void)' } }
    : {
        200: {
          description: 'What the function returned',
          content: json(results.length === 1 ? results[0]! : { oneOf: results.map((s) => s ?? { type: 'null' }) }),
        },
      };
  const path: Record<string, unknown> = {
    post: {
      operationId: operationId('post', first!.name, true),
      tags: ['rpc'],
      summary,
      parameters: [idempotencyKeyHeader()],
      requestBody: { required: false, content: json(argumentsSchema(overloads, rows)) },
      responses: { ...answer, ...ERRORS },
    },
  };
  // GET for the functions that change nothing, their arguments (values, named) in the query.
  const reads = overloads.filter(
    (r) => r.volatility !== 'volatile' && r.params.every((p) => p.name !== '' && !rows.has(p.baseType)),
  );
  if (reads.length > 0) {
    const params = new Map<string, boolean>();
    for (const r of reads) for (const p of r.params) params.set(p.name, (params.get(p.name) ?? true) && p.required);
    path.get = {
      operationId: operationId('get', first!.name, true),
      tags: ['rpc'],
      summary,
      parameters: [
        ...[...params].map(([name, required]) => ({
          ...query(name, `The argument ${name}`),
          required: required && reads.length === 1,
        })),
        SELECT,
      ],
      responses: { ...answer, ...ERRORS },
    };
  }
  return path;
}

export function openApi31(described: Described): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, JsonSchema> = {};
  const names = new Map<Relation, string>();
  for (const { relation, allowed } of described.relations) {
    const name = componentName(relation.name);
    const own = relationSchemas(relation, allowed, name);
    if (own[name]) names.set(relation, name);
    Object.assign(schemas, own);
    const path = relationPaths(relation, allowed, name);
    if (Object.keys(path).length > 0) paths[`/${encodeURIComponent(relation.name)}`] = path;
  }
  const byName = new Map<string, Routine[]>();
  for (const r of described.routines) byName.set(r.name, [...(byName.get(r.name) ?? []), r]);
  for (const [name, overloads] of [...byName].sort(([a], [b]) => a.localeCompare(b))) {
    paths[`/rpc/${encodeURIComponent(name)}`] = routinePath(overloads, names);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tally table interface',
      version: '1.0.0',
      description:
        `The tables, views and functions of schema ${described.schema} as your role may use them, in PostgREST's ` +
        'grammar. Send the apikey header, and Authorization: Bearer <access token> for more than anonymous access.',
    },
    servers: [{ url: '/rest/v1' }],
    security: [{ apikey: [], bearer: [] }, { apikey: [] }],
    paths,
    components: {
      // The error shape, where an operation answers it (a role that may do nothing has none).
      schemas: { ...schemas, ...(Object.keys(paths).length > 0 ? { [ERROR]: ERROR_SCHEMA } : {}) },
      ...(Object.keys(paths).length > 0
        ? {
            responses: {
              error: { description: 'The error, in the one shape of every error', content: json(ref(ERROR)) },
            },
          }
        : {}),
      securitySchemes: {
        apikey: { type: 'apiKey', in: 'header', name: 'apikey', description: 'A publishable key (tally_pk_…)' },
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'An access token' },
      },
    },
  };
}
