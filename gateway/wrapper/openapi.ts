import { CATEGORY_DOMAINS, RESOURCES, type Resource } from './resources.js';
import type { JsonSchema, WrapperSchemas } from './schemas.js';
import { isReservedKey } from '../engine/request/types.js';
import { OPERATOR_NAMES } from '../engine/operators.js';
import { idempotencyKeyHeader, published } from '../fields.js';

// GET /api/v1/openapi.json (and /openapi.json): the OpenAPI 3.1 description of
// the wrapper, built per request from the live schemas: components.schemas are the objects ajv
// validates with (as published: the decimals of an amount in words, see fields.ts), so the enums
// a client reads are the ones enforced at that moment.

const VERSION = '1.0.0';

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const content = (schema: JsonSchema) => ({ 'application/json': { schema } });
const response = (name: string) => ({ $ref: `#/components/responses/${name}` });

/** The refusals every authenticated operation can meet. */
const COMMON_ERRORS = { 401: response('Unauthorized'), 403: response('Forbidden'), 429: response('TooManyRequests') };

const idParameter = (noun: string) => ({
  name: 'id',
  in: 'path',
  required: true,
  description: `The ${noun} id`,
  schema: { type: 'string', format: 'uuid' },
});

/**
 * The query parameters of a list: the wrapper's defaults, the documented filters, and one
 * optional filter per other column of the record. A free-form `filters` object (style form,
 * explode) stood here: Swagger UI's "Try it out" sent additionalProp1=string and openapi-fetch
 * filters[method_id]=…, both 400s; named parameters are what tools send as they are.
 */
function listParameters(resource: Resource, schemas: WrapperSchemas): unknown[] {
  const d = resource.listDefaults;
  const q = (name: string, description: string, schema: JsonSchema) => ({
    name,
    in: 'query',
    required: false,
    description,
    schema,
  });
  return [
    q('select', `Columns and embedded relations to return, PostgREST syntax (default ${d.select ?? '*'})`, {
      type: 'string',
      default: d.select ?? '*',
    }),
    q(
      'order',
      `Sort order, e.g. occurred_at.desc,id.desc${d.order ? ` (default ${d.order})` : ''}`,
      d.order ? { type: 'string', default: d.order } : { type: 'string' },
    ),
    q(
      'limit',
      `Page size${d.limit ? ` (default ${d.limit})` : ''}`,
      d.limit ? { type: 'integer', minimum: 0, default: Number(d.limit) } : { type: 'integer', minimum: 0 },
    ),
    q('offset', 'How many records to skip', { type: 'integer', minimum: 0 }),
    ...resource.filters.map((f) => ({ ...q(f.name, f.description, { type: 'string' }), example: f.example })),
    ...Object.keys(
      (schemas as unknown as Record<string, { properties?: Record<string, unknown> }>)[resource.record]?.properties ??
        {},
    )
      .filter((column) => !resource.filters.some((f) => f.name === column) && !isReservedKey(column))
      .map((column) =>
        q(
          column,
          `Filter on ${column}, PostgREST syntax operator.value with an operator among: ${OPERATOR_NAMES.join(', ')}`,
          { type: 'string' },
        ),
      ),
    q('or', 'Filters of which any may hold, PostgREST syntax: (amount.gt.100,category_id.eq.travel)', {
      type: 'string',
    }),
    q('and', 'Filters that must all hold, PostgREST syntax: (amount.gt.10,amount.lt.100)', { type: 'string' }),
    {
      name: 'Prefer',
      in: 'header',
      required: false,
      description: 'count=exact adds the total to Content-Range',
      schema: { type: 'string', enum: ['count=exact', 'count=planned', 'count=estimated'] },
    },
  ];
}

const CONTENT_RANGE = {
  'Content-Range': {
    description: 'The range of the page and, with Prefer: count=…, the total: 0-19/123',
    schema: { type: 'string' },
  },
};

/** The ETag of one record (its row), and the If-Match that makes a change conditional on it. */
const ETAG = {
  ETag: { description: "The record's version: send it as If-Match with a PATCH or DELETE", schema: { type: 'string' } },
};
const IF_MATCH = {
  name: 'If-Match',
  in: 'header',
  required: false,
  description:
    'The ETag of GET of the record: the change is made only if the record is still as read; otherwise 412 and nothing is written',
  schema: { type: 'string' },
};

/** "a fund", "an expense". */
const article = (noun: string): string => `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`;

function resourcePaths(resource: Resource, schemas: WrapperSchemas): Record<string, unknown> {
  const paths: Record<string, unknown> = {
    [`/${resource.path}`]: collectionPath(resource, schemas),
    [`/${resource.path}/{id}`]: memberPath(resource),
  };
  for (const action of resource.actions ?? [])
    paths[`/${resource.path}/{id}/${action.name}`] = actionPath(resource, action);
  for (const action of resource.collectionActions ?? [])
    paths[`/${resource.path}/${action.name}`] = collectionActionPath(resource, action);
  return paths;
}

/** POST /{path}/{name}: a function called with the request's body (resources.ts CollectionAction). */
function collectionActionPath(
  resource: Resource,
  action: NonNullable<Resource['collectionActions']>[number],
): Record<string, unknown> {
  return {
    post: {
      operationId: action.operationId,
      tags: [resource.path],
      summary: action.summary,
      description: action.description,
      parameters: [idempotencyKeyHeader()],
      requestBody: { required: true, content: content(ref(action.request)) },
      responses: {
        200: {
          description: 'What the function returned',
          content: content({ type: 'array', items: ref(action.returns) }),
        },
        400: response('BadRequest'),
        404: errorResponse("A change named is not in the workspace's activity (PT404)"),
        409: errorResponse(
          'A change cannot be undone: its record changed again since, or it was undone already (PT409; the message names the change in the way)',
        ),
        413: errorResponse('More than 1000 changes to undo at once (PT413)'),
        422: response('IdempotencyKeyReused'),
        ...COMMON_ERRORS,
      },
    },
  };
}

/** POST /{path}/{id}/{name}: a function called with the record's id (resources.ts Action). */
function actionPath(resource: Resource, action: NonNullable<Resource['actions']>[number]): Record<string, unknown> {
  return {
    parameters: [idParameter(resource.noun)],
    post: {
      operationId: action.operationId,
      tags: [resource.path],
      summary: action.summary,
      description: action.description,
      parameters: [idempotencyKeyHeader()],
      responses: {
        200: {
          description: 'What the function returned',
          content: content({ type: 'array', items: ref(action.returns) }),
        },
        404: response('NotFound'),
        409: errorResponse(
          'The change cannot be undone: the record changed again since (the message names that change)',
        ),
        422: response('IdempotencyKeyReused'),
        ...COMMON_ERRORS,
      },
    },
  };
}

/** /{path}: the list, and the create where the resource offers it. */
function collectionPath(resource: Resource, schemas: WrapperSchemas): Record<string, unknown> {
  const tag = resource.path;
  const noun = resource.noun;
  const collection: Record<string, unknown> = {
    get: {
      operationId: `list_${resource.path}`,
      tags: [tag],
      summary: resource.listSummary,
      description:
        'Results are those of the same query on /rest/v1: the defaults apply to the parameters the client does not send.',
      parameters: listParameters(resource, schemas),
      responses: {
        200: {
          description: `The ${noun} records`,
          headers: CONTENT_RANGE,
          content: content({ type: 'array', items: ref(resource.listItem) }),
        },
        206: {
          description: 'A partial page (Range)',
          headers: CONTENT_RANGE,
          content: content({ type: 'array', items: ref(resource.listItem) }),
        },
        400: response('BadRequest'),
        ...COMMON_ERRORS,
      },
    },
  };
  if (resource.create) {
    collection.post = {
      operationId: `create_${resource.path}`,
      tags: [tag],
      summary: `Create ${article(noun)}`,
      parameters: [idempotencyKeyHeader()],
      requestBody: { required: true, content: content(ref(resource.create)) },
      responses: {
        201: {
          description: `The created ${noun}`,
          content: content(ref(resource.record)),
          headers: {
            Location: { description: `/api/v1/${resource.path}/{id} of the new ${noun}`, schema: { type: 'string' } },
          },
        },
        400: response('BadRequest'),
        ...COMMON_ERRORS,
        409: response('Conflict'),
        422: response('IdempotencyKeyReused'),
      },
    };
  }
  return collection;
}

/** /{path}/{id}: one record, and its change and deletion where the resource offers them. */
function memberPath(resource: Resource): Record<string, unknown> {
  const tag = resource.path;
  const noun = resource.noun;
  const member: Record<string, unknown> = { parameters: [idParameter(noun)] };
  const detail = resource.detail;
  member.get = {
    operationId: detail?.operationId ?? `get_${resource.path}`,
    tags: [tag],
    summary: detail?.summary ?? `Get one ${noun}`,
    responses: {
      200: { description: `The ${noun}`, headers: ETAG, content: content(ref(detail?.schema ?? resource.record)) },
      404: response('NotFound'),
      ...COMMON_ERRORS,
    },
  };
  if (resource.update) {
    member.patch = {
      operationId: `update_${resource.path}`,
      tags: [tag],
      summary: `Change fields of ${article(noun)}`,
      parameters: [IF_MATCH],
      requestBody: { required: true, content: content(ref(resource.update)) },
      responses: {
        200: { description: `The ${noun} as changed`, headers: ETAG, content: content(ref(resource.record)) },
        400: response('BadRequest'),
        404: response('NotFound'),
        412: response('RecordChanged'),
        ...COMMON_ERRORS,
        409: response('Conflict'),
      },
    };
  }
  if (resource.remove) {
    member.delete = {
      operationId: `delete_${resource.path}`,
      tags: [tag],
      summary: `Delete ${article(noun)} permanently`,
      description: 'Answers 200 with the deleted record, so a client can show or undo what was removed.',
      parameters: [IF_MATCH],
      responses: {
        200: { description: `The deleted ${noun}`, content: content(ref(resource.record)) },
        404: response('NotFound'),
        412: response('RecordChanged'),
        ...COMMON_ERRORS,
      },
    };
  }
  return member;
}

const errorResponse = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: content(ref('Error')),
});

export function openApiDocument(
  schemas: WrapperSchemas,
  serverUrl: string,
  ratePerMinute: number,
): Record<string, unknown> {
  const paths: Record<string, unknown> = { ...tokenPaths() };
  for (const resource of RESOURCES) Object.assign(paths, resourcePaths(resource, schemas));
  Object.assign(paths, lookupPaths(), metaPaths());
  return published({
    openapi: '3.1.0',
    info: {
      title: 'Tally REST API',
      version: VERSION,
      description:
        'The REST wrapper of Tally, the workspace finance service: personal expenses, group funds, fund transactions and contacts ' +
        'of one workspace. Exchange a workspace token at POST /token, then send Authorization: Bearer <access_token>. ' +
        'Errors have one shape: {code, message, details, hint}. Category and method lists are live: read them here or at /categories and /payment_methods.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'personal_transactions', description: 'Personal expenses' },
      { name: 'funds', description: 'Group funds (trips, seasons, event budgets)' },
      { name: 'fund_transactions', description: 'Income and expenses of funds' },
      { name: 'contacts', description: 'Members and participants' },
      { name: 'lookups', description: 'Live lists of categories and payment methods' },
      { name: 'auth', description: 'Token exchange' },
      { name: 'meta', description: 'This description' },
    ],
    paths,
    components: components(schemas, ratePerMinute),
  });
}

/** POST /token, the exchange. */
function tokenPaths(): Record<string, unknown> {
  return {
    '/token': {
      post: {
        operationId: 'exchange_token',
        tags: ['auth'],
        summary: 'Exchange a workspace token for a one-hour access token',
        description:
          'The workspace token (tally_ws_…) goes in Authorization: Bearer, in the x-api-token header, or in the body field token. ' +
          'Every other operation needs the access token it returns, as Authorization: Bearer.',
        security: [{ workspaceToken: [] }, { workspaceTokenHeader: [] }, {}],
        requestBody: { required: false, content: content(ref('TokenRequest')) },
        responses: {
          200: { description: 'The access token', content: content(ref('TokenResponse')) },
          400: response('BadRequest'),
          401: errorResponse('The workspace token is missing, malformed or revoked'),
          403: errorResponse('The workspace API switch is off'),
          429: response('TooManyRequests'),
        },
      },
    },
  };
}

/** The live lookup lists: GET /categories and GET /payment_methods. */
function lookupPaths(): Record<string, unknown> {
  return {
    '/categories': {
      get: {
        operationId: 'list_categories',
        tags: ['lookups'],
        summary: 'List the categories (live; they grow without a release)',
        parameters: [
          {
            name: 'domain',
            in: 'query',
            required: false,
            description: 'Only the categories of expenses or of fund transactions',
            schema: { type: 'string', enum: Object.keys(CATEGORY_DOMAINS) },
          },
        ],
        responses: {
          200: { description: 'The categories', content: content({ type: 'array', items: ref('Category') }) },
          400: response('BadRequest'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/payment_methods': {
      get: {
        operationId: 'list_payment_methods',
        tags: ['lookups'],
        summary: 'List the payment methods (live)',
        responses: {
          200: { description: 'The payment methods', content: content({ type: 'array', items: ref('PaymentMethod') }) },
          ...COMMON_ERRORS,
        },
      },
    },
  };
}

/** This document. */
function metaPaths(): Record<string, unknown> {
  return {
    '/openapi.json': {
      get: {
        operationId: 'openapi',
        tags: ['meta'],
        summary: 'This document, with the live category and method lists',
        security: [],
        responses: {
          200: { description: 'OpenAPI 3.1 document', content: { 'application/json': { schema: { type: 'object' } } } },
          429: response('TooManyRequests'),
        },
      },
    },
  };
}

/** The security schemes, the record schemas and the error responses every path refers to. */
function components(schemas: WrapperSchemas, ratePerMinute: number): Record<string, unknown> {
  return {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: 'The access token of POST /token (valid one hour)',
      },
      workspaceToken: {
        type: 'http',
        scheme: 'bearer',
        description: 'A workspace token (tally_ws_…), for POST /token only',
      },
      workspaceTokenHeader: {
        type: 'apiKey',
        in: 'header',
        name: 'x-api-token',
        description: 'A workspace token, for POST /token only',
      },
    },
    schemas: { ...schemas },
    responses: {
      BadRequest: errorResponse(
        'Malformed JSON, a wrong type, a missing or unknown field, a number out of bounds or a value not in its list; the message names the field',
      ),
      Unauthorized: errorResponse(
        'The access token is missing, malformed, revoked or expired (a workspace token must be exchanged first)',
        {
          'WWW-Authenticate': { description: 'Bearer challenge', schema: { type: 'string' } },
        },
      ),
      Forbidden: errorResponse('The token is read-only (for a write), or the workspace API switch is off'),
      NotFound: errorResponse('No record with this id in the workspace'),
      Conflict: errorResponse(
        'The record refers to one that does not exist in the workspace (e.g. an unknown fund_id)',
      ),
      RecordChanged: errorResponse(
        'The record changed since the ETag given as If-Match was read; nothing was written (TLY101)',
      ),
      IdempotencyKeyReused: errorResponse(
        'The Idempotency-Key was sent in the last 24 hours with a different request (TLY021)',
      ),
      TooManyRequests: errorResponse(
        `Rate limit exceeded (${ratePerMinute} requests per minute per workspace token, all surfaces together)`,
        {
          'Retry-After': { description: 'Seconds to wait before the next request', schema: { type: 'integer' } },
        },
      ),
    },
  };
}
