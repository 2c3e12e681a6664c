// The Swagger 2.0 description of /rest/v1, the root's default (PostgREST serves Swagger 2.0 there,
// and its clients read it): the OpenAPI 3.1 description (openapi31.ts), what the caller's role
// may do with each table, view and function, written in Swagger 2.0's terms. Where 2.0 has no
// word for something, the nearest: a body that is one row or an array of rows is described as
// one row; a value that may be null says so with x-nullable; of several shapes (overloads), the
// first, with all of them in x-oneOf; the bearer token is an apiKey in the Authorization header;
// a request's errors (4XX) are said of 400.

type Json = Record<string, unknown>;

const is = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A 3.1 schema as a Swagger 2.0 one. */
function schema20(s: unknown): Json {
  if (!is(s)) return {};
  if (typeof s.$ref === 'string') return { $ref: s.$ref.replace('#/components/schemas/', '#/definitions/') };
  if (Array.isArray(s.oneOf)) {
    const shapes = (s.oneOf as unknown[]).filter((o) => !(is(o) && o.type === 'null')).map(schema20);
    const [first = {}] = shapes;
    if (shapes.length < 2) return shapes.length < s.oneOf.length ? nullable(first) : first;
    return { ...(first.$ref ? { allOf: [first] } : first), 'x-oneOf': shapes };
  }
  const out: Json = {};
  for (const [key, value] of Object.entries(s)) {
    if (key === 'type' && Array.isArray(value)) {
      const types = value.filter((t) => t !== 'null');
      if (types.length === 1) out.type = types[0];
      if (types.length < value.length) out['x-nullable'] = true;
    } else if (key === 'type' && value === 'null') {
      out['x-nullable'] = true;
    } else if (key === 'properties' && is(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, schema20(v)]));
    } else if (key === 'items') {
      out.items = schema20(value);
    } else if (!(key === 'required' && Array.isArray(value) && value.length === 0)) out[key] = value; // 2.0: none is no list
  }
  return out;
}

const nullable = (s: Json): Json => (s.$ref ? { allOf: [s], 'x-nullable': true } : { ...s, 'x-nullable': true });

/** A query or header parameter: its schema's words on the parameter itself. */
function parameter20(p: Json): Json {
  const { schema, ...rest } = p;
  const s = schema20(schema);
  return { ...rest, type: s.type ?? 'string', ...pick(s, ['format', 'minimum', 'minLength', 'maxLength', 'pattern']) };
}

const pick = (s: Json, keys: string[]): Json => Object.fromEntries(keys.filter((k) => k in s).map((k) => [k, s[k]]));

const jsonSchemaOf = (content: unknown): Json | undefined => {
  const json = is(content) ? content['application/json'] : undefined;
  return is(json) && 'schema' in json ? schema20(json.schema) : undefined;
};

function response20(r: unknown): Json {
  if (!is(r)) return {};
  if (typeof r.$ref === 'string') return { $ref: r.$ref.replace('#/components/responses/', '#/responses/') };
  const schema = jsonSchemaOf(r.content);
  return { description: r.description, ...(schema ? { schema } : {}) };
}

function operation20(op: Json): Json {
  const { parameters, requestBody, responses, ...rest } = op;
  const params = (Array.isArray(parameters) ? parameters : []).filter(is).map(parameter20);
  if (is(requestBody)) {
    const body = jsonSchemaOf(requestBody.content) ?? {};
    params.push({ name: 'body', in: 'body', required: requestBody.required === true, schema: body });
  }
  const answers = is(responses) ? responses : {};
  return {
    ...rest,
    parameters: params,
    // 2.0 has no ranges of codes: a request's errors are said of 400.
    responses: Object.fromEntries(
      Object.entries(answers).map(([code, r]) => [code === '4XX' ? '400' : code, response20(r)]),
    ),
  };
}

/** The OpenAPI 3.1 document `doc` (openApi31) in Swagger 2.0. */
export function swagger20Of(doc: Json): Json {
  const paths = is(doc.paths) ? doc.paths : {};
  const components = is(doc.components) ? doc.components : {};
  const schemas = is(components.schemas) ? components.schemas : {};
  const responses = is(components.responses) ? components.responses : {};
  const info = is(doc.info) ? doc.info : {};
  return {
    swagger: '2.0',
    info,
    basePath: '/rest/v1',
    consumes: ['application/json', 'application/vnd.pgrst.object+json', 'text/csv'],
    produces: ['application/json', 'application/vnd.pgrst.object+json', 'text/csv'],
    security: doc.security,
    paths: Object.fromEntries(
      Object.entries(paths).map(([path, item]) => [
        path,
        Object.fromEntries(Object.entries(is(item) ? item : {}).map(([m, op]) => [m, operation20(is(op) ? op : {})])),
      ]),
    ),
    definitions: Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, schema20(s)])),
    responses: Object.fromEntries(Object.entries(responses).map(([name, r]) => [name, response20(r)])),
    securityDefinitions: {
      apikey: { type: 'apiKey', in: 'header', name: 'apikey', description: 'A publishable key (tally_pk_…)' },
      bearer: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description: 'Bearer and an access token: Bearer <JWT>',
      },
    },
  };
}
