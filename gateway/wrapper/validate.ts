import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { catalogue } from '../errors.js';
import { DECIMALS, decimalsOf } from '../fields.js';
import type { Lookups } from '../lookups.js';
import { REQUEST_SCHEMAS, wrapperSchemas, type RequestSchemaName, type WrapperSchemas } from './schemas.js';

// Request bodies are checked before any gateway call: a 400 names every offending field and
// nothing is written. The schemas (and their compiled validators) are built once per version
// of the live lookups: LookupCache hands out the same Lookups object until the lists change,
// so a WeakMap keyed by it caches exactly per version and drops old versions with them.

// ajv-formats is CommonJS with a default export; under NodeNext its type is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export interface CompiledSchemas {
  schemas: WrapperSchemas;
  validators: Record<RequestSchemaName, ValidateFunction>;
}

const compiled = new WeakMap<Lookups, CompiledSchemas>();

/** The validator of the field rules (gateway/fields.ts), for the wrapper's bodies and the MCP tools' arguments alike. */
export function createAjv(): Ajv2020 {
  const ajv = new Ajv2020({
    allErrors: true,
    strict: true,
    allowUnionTypes: true,
    verbose: true,
  });
  addFormats(ajv);
  // At most this many decimals, counted on the number as written, not divided in floating point.
  ajv.addKeyword({
    keyword: DECIMALS,
    type: 'number',
    schemaType: 'number',
    validate: (max: number, value: number) => decimalsOf(value) <= max,
  });
  return ajv;
}

export function schemasFor(lookups: Lookups): CompiledSchemas {
  let entry = compiled.get(lookups);
  if (!entry) {
    const schemas = wrapperSchemas(lookups);
    const ajv = createAjv();
    const validators = Object.fromEntries(REQUEST_SCHEMAS.map((name) => [name, ajv.compile(schemas[name])])) as Record<
      RequestSchemaName,
      ValidateFunction
    >;
    entry = { schemas, validators };
    compiled.set(lookups, entry);
  }
  return entry;
}

const FORMAT_WORDS: Record<string, string> = {
  'date-time': 'an ISO 8601 date-time with a time zone, such as 2026-03-14T18:30:00Z',
  date: 'an ISO 8601 date such as 2026-03-14',
  uuid: 'a UUID',
  email: 'an email address',
};

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

function fieldOf(error: ErrorObject): string {
  const path = error.instancePath.replace(/^\//, '').replace(/\//g, '.').replace(/~1/g, '/').replace(/~0/g, '~');
  return path === '' ? 'the request body' : path;
}

/** One sentence per ajv error, each naming its field. */
export function describeError(error: ErrorObject, schema: Record<string, unknown>): string {
  const field = fieldOf(error);
  const p = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${p.missingProperty as string} is required`;
    case 'additionalProperties': {
      const known = Object.keys((schema.properties as object | undefined) ?? {});
      return `${p.additionalProperty as string} is not a known field (known fields: ${known.join(', ')})`;
    }
    case 'minProperties':
      return `the request body must change at least one field: ${Object.keys((schema.properties as object | undefined) ?? {}).join(', ')}`;
    case 'type': {
      const types = String(p.type)
        .split(',')
        .map((t) => TYPE_WORDS[t] ?? t);
      return `${field} must be ${types.join(' or ')}`;
    }
    case 'enum':
      return `${field} must be one of: ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'not':
      return field === 'amount' ? 'amount must not be 0' : `${field} has a value that is not allowed`;
    case 'format':
      return `${field} must be ${FORMAT_WORDS[p.format as string] ?? `in the format ${p.format as string}`}`;
    case 'minLength':
      return Number(p.limit) === 1
        ? `${field} must not be empty`
        : `${field} must be at least ${p.limit as number} characters`;
    case 'maxLength':
      return `${field} must be at most ${p.limit as number} characters`;
    case 'minimum':
      return `${field} must be ${p.limit as number} or more`;
    case 'maximum':
      return `${field} must be ${p.limit as number} or less`;
    case 'exclusiveMinimum':
      return `${field} must be greater than ${p.limit as number}`;
    case 'exclusiveMaximum':
      return `${field} must be less than ${p.limit as number}`;
    case 'oneOf': {
      // Branches that each require one property (UndoRequest): exactly one of them is given.
      const ways = ((error.schema as { required?: string[] }[] | undefined) ?? []).map((b) =>
        (b.required ?? []).join(' and '),
      );
      return `${field} must give exactly one of: ${ways.join(', ')}`;
    }
    case DECIMALS:
      return `${field} must have at most ${(error.schema as number) ?? 0} decimal places`;
    case 'pattern': {
      // The field's description says what is allowed in words (verbose errors carry it).
      const described = (error.parentSchema as { description?: string } | undefined)?.description;
      return described
        ? `${field} has the wrong format: ${described}`
        : `${field} has the wrong format (pattern ${p.pattern as string})`;
    }
    default:
      return `${field} ${error.message ?? 'is invalid'}`;
  }
}

/** Checks a request body; throws the 400 (PGRST102, every problem named) when it fails. */
export function validateBody(
  compiledSchemas: CompiledSchemas,
  name: RequestSchemaName,
  body: unknown,
): Record<string, unknown> {
  if (body === undefined) {
    throw catalogue.invalidBody(
      'Invalid request body: the body is missing',
      null,
      'Send a JSON object with Content-Type: application/json',
    );
  }
  const validate = compiledSchemas.validators[name];
  if (validate(body)) return body as Record<string, unknown>;
  const schema = compiledSchemas.schemas[name];
  // A wrong type of the whole body makes every other error noise.
  // A branch of oneOf that does not match says so through the oneOf's own error.
  const errors = (validate.errors ?? []).filter((e) => !e.schemaPath.startsWith('#/oneOf/'));
  const rootType = errors.find((e) => e.instancePath === '' && e.keyword === 'type');
  const problems = [...new Set((rootType ? [rootType] : errors).map((e) => describeError(e, schema)))];
  throw catalogue.invalidBody(
    `Invalid request body: ${problems.join('; ')}`,
    problems.join('\n'),
    `See the ${name} schema in /api/v1/openapi.json`,
  );
}
