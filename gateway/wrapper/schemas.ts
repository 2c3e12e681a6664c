import type { Lookups } from '../lookups.js';
import { financeFields, financeRecords, nullable, uuid, type JsonSchema } from '../fields.js';

export type { JsonSchema } from '../fields.js';

// The JSON Schemas of the /api/v1 wrapper (JSON Schema 2020-12, the dialect of OpenAPI 3.1).
// One function of the live lookups builds them from the field rules of gateway/fields.ts; ajv validates request bodies with these very
// objects and the OpenAPI document publishes them, so the documented enums are the enforced
// ones. Request schemas are self-contained (no $ref) so that ajv compiles each on its own.

function object(properties: Record<string, JsonSchema>, required: string[], description: string): JsonSchema {
  return { type: 'object', description, properties, required, additionalProperties: false };
}

/** An update: every field optional, at least one given. */
function patch(properties: Record<string, JsonSchema>, description: string): JsonSchema {
  return { type: 'object', description, properties, minProperties: 1, additionalProperties: false };
}

/** The request bodies (validated by ajv, REQUEST_SCHEMAS below) and the records answered (documented). */
export interface WrapperSchemas extends Record<RequestSchemaName, JsonSchema> {
  Expense: JsonSchema;
  FundTransaction: JsonSchema;
  Fund: JsonSchema;
  FundWithTransactions: JsonSchema;
  FundDetail: JsonSchema;
  Contact: JsonSchema;
  Participant: JsonSchema;
  Activity: JsonSchema;
  Undone: JsonSchema;
  Category: JsonSchema;
  PaymentMethod: JsonSchema;
  Error: JsonSchema;
  TokenRequest: JsonSchema;
  TokenResponse: JsonSchema;
}

/** The request bodies ajv validates; the type of their names is made from this one list. */
export const REQUEST_SCHEMAS = [
  'ExpenseCreate',
  'ExpenseUpdate',
  'FundTransactionCreate',
  'FundTransactionUpdate',
  'FundCreate',
  'FundUpdate',
  'ContactCreate',
  'ContactUpdate',
  'UndoRequest',
] as const;

export type RequestSchemaName = (typeof REQUEST_SCHEMAS)[number];

export function wrapperSchemas(lookups: Lookups): WrapperSchemas {
  return { ...requestSchemas(lookups), ...recordSchemas(), ...tokenAndErrorSchemas() };
}

/** The request bodies: the field rules, with the live lookups as enums. */
function requestSchemas(lookups: Lookups): Record<RequestSchemaName, JsonSchema> {
  const {
    expense: expenseFields,
    fundTransaction: fundTransactionFields,
    fund: fundFields,
    contact: contactFields,
  } = financeFields(lookups);
  return {
    ExpenseCreate: object(expenseFields, ['name', 'amount', 'category_id', 'method_id'], 'A new personal expense'),
    ExpenseUpdate: patch(
      { ...expenseFields, note: nullable(expenseFields.note) },
      'Fields of an expense to change; others stay as they are',
    ),
    FundTransactionCreate: object(
      fundTransactionFields,
      ['fund_id', 'name', 'amount', 'category_id', 'method_id'],
      'A new fund transaction',
    ),
    FundTransactionUpdate: patch(
      {
        name: fundTransactionFields.name,
        amount: fundTransactionFields.amount,
        category_id: fundTransactionFields.category_id,
        method_id: fundTransactionFields.method_id,
        occurred_at: fundTransactionFields.occurred_at,
      },
      'Fields of a fund transaction to change (it stays in its fund)',
    ),
    FundCreate: object(
      {
        name: fundFields.name,
        kind: fundFields.kind,
        currency: fundFields.currency,
        target_amount: fundFields.target_amount,
        description: fundFields.description,
        start_date: fundFields.start_date,
        end_date: fundFields.end_date,
        contribution_amount: fundFields.contribution_amount,
        contribution_frequency: fundFields.contribution_frequency,
        contribution_due_day: fundFields.contribution_due_day,
      },
      ['name'],
      'A new fund; its status starts as Upcoming',
    ),
    FundUpdate: patch(
      {
        name: fundFields.name,
        status: fundFields.status,
        kind: fundFields.kind,
        target_amount: nullable(fundFields.target_amount),
        description: nullable(fundFields.description),
        start_date: nullable(fundFields.start_date),
        end_date: nullable(fundFields.end_date),
      },
      'Fields of a fund to change; status may be set to any of the three values',
    ),
    UndoRequest: undoRequest(),
    ContactCreate: object(contactFields, ['name'], 'A new contact'),
    ContactUpdate: patch(
      {
        name: contactFields.name,
        nickname: nullable(contactFields.nickname),
        phone: nullable(contactFields.phone),
        email: nullable(contactFields.email),
      },
      'Fields of a contact to change (null clears an optional one)',
    ),
  };
}

/**
 * What POST /activity/undo undoes (public.undo_changes), named in exactly one way: each of the
 * three ways is a branch of oneOf that requires its property (validate.ts says it in a sentence).
 */
function undoRequest(): JsonSchema {
  return {
    type: 'object',
    description:
      "What to undo, named in one way: activity_ids, request_id, or since (the caller's token's changes, or token_id's)",
    properties: {
      activity_ids: {
        type: 'array',
        items: uuid('A change'),
        minItems: 1,
        maxItems: 1000,
        uniqueItems: true,
        description: 'The changes to undo (GET /activity lists them; a write names its own in Tally-Activity-Id)',
      },
      request_id: uuid('Every change of one request (its Tally-Request-Id header)'),
      since: {
        type: 'string',
        format: 'date-time',
        description: 'Every change of the token at or after this moment (ISO 8601), e.g. 2026-11-28T10:00:00Z',
      },
      token_id: uuid("With since: another write token of the workspace than the caller's"),
      dry_run: { type: 'boolean', description: 'Only answer what the undo would do; change nothing (default false)' },
    },
    additionalProperties: false,
    // (Each branch names its property among its own properties too: ajv's strict mode wants it.)
    oneOf: ['activity_ids', 'request_id', 'since'].map((way) => ({ properties: { [way]: true }, required: [way] })),
  };
}

/**
 * A record as the wrapper answers it: every column is in the answer (null where it is empty), so
 * every property is required, and generated client types do not make each one optional.
 */
const record = (properties: Record<string, JsonSchema>, description: string): JsonSchema => ({
  type: 'object',
  description,
  properties,
  required: Object.keys(properties),
});

/** The records the wrapper answers with. */
function recordSchemas(): Pick<
  WrapperSchemas,
  | 'Expense'
  | 'FundTransaction'
  | 'Fund'
  | 'FundWithTransactions'
  | 'FundDetail'
  | 'Contact'
  | 'Participant'
  | 'Activity'
  | 'Undone'
  | 'Category'
  | 'PaymentMethod'
> {
  const {
    expense: Expense,
    fundTransaction: FundTransaction,
    fundProperties,
    contact: Contact,
    participant: Participant,
  } = financeRecords();
  // The finance records as the gateway answers any select; the wrapper answers every column.
  const whole = (schema: JsonSchema) =>
    record(schema.properties as Record<string, JsonSchema>, schema.description as string);
  return {
    Expense: whole(Expense),
    FundTransaction: whole(FundTransaction),
    ...fundRecords(fundProperties, whole(FundTransaction), whole(Participant)),
    Contact: whole(Contact),
    Participant: whole(Participant),
    Activity: activityRecord(),
    Undone: record(
      {
        undone: { type: 'string', format: 'uuid', description: 'The change undone' },
        table_name: { type: 'string' },
        record_id: { type: 'string', description: "The record's id (a fund participant: fund_id/contact_id)" },
        action: {
          type: 'string',
          enum: ['insert', 'update', 'delete'],
          description: 'What the undo does to the record: insert brings it back, update reverts it, delete removes it',
        },
        activity_id: {
          type: ['string', 'null'],
          format: 'uuid',
          description: "The undo's own change (null in a dry run)",
        },
      },
      'A record an undo puts back, in the order it is done (newest change first)',
    ),
    ...lookupRecords(),
  };
}

/** A fund as GET /funds lists it (with its transactions embedded, by default) and as GET /funds/{id} answers it. */
function fundRecords(
  fundProperties: Record<string, JsonSchema>,
  FundTransaction: JsonSchema,
  Participant: JsonSchema,
): Pick<WrapperSchemas, 'Fund' | 'FundWithTransactions' | 'FundDetail'> {
  return {
    Fund: record(fundProperties, 'A group fund; it has no stored balance'),
    FundWithTransactions: record(
      {
        ...fundProperties,
        fund_transactions: { type: 'array', items: FundTransaction, description: "The fund's transactions (embedded)" },
      },
      'A fund with its embedded transactions (the default select of GET /funds)',
    ),
    FundDetail: record(
      {
        ...fundProperties,
        balance: {
          type: 'number',
          description: "Sum of the amounts of the fund's transactions, computed on read (summary.balance)",
        },
        summary: {
          type: 'object',
          description:
            "The fund's figures from the SQL function fund_summary (also GET /rest/v1/rpc/fund_summary?fund_id=…)",
          properties: {
            balance: { type: 'number', description: 'Income minus expenses' },
            income: { type: 'number', description: 'Sum of the positive transactions' },
            expenses: { type: 'number', description: 'Sum of the negative transactions, as a positive number' },
            progress: {
              type: ['number', 'null'],
              description: 'Balance divided by the target amount, rounded to 4 places; null without a target',
            },
            participant_count: { type: 'integer', description: 'How many contacts take part' },
          },
          required: ['balance', 'income', 'expenses', 'progress', 'participant_count'],
        },
        fund_transactions: { type: 'array', items: FundTransaction, description: 'The ledger, newest first' },
        participants: {
          type: 'array',
          items: Participant,
          description: 'The contacts taking part, with when they joined',
        },
      },
      'One fund with its balance and figures, ledger and participants',
    ),
  };
}

/** A change of the activity log (GET /activity). */
function activityRecord(): JsonSchema {
  return record(
    {
      workspace_id: { type: 'string', format: 'uuid' },
      id: { type: 'string', format: 'uuid', description: 'The change; POST /activity/{id}/undo takes it' },
      at: { type: 'string', format: 'date-time' },
      table_name: { type: 'string' },
      record_id: { type: 'string', description: "The record's id (a fund participant: fund_id/contact_id)" },
      action: { type: 'string', enum: ['insert', 'update', 'delete'] },
      before: {
        type: ['object', 'null'],
        description:
          'A delete: the record removed; an update: the old values of the fields it changed; null for an insert',
      },
      after: {
        type: ['object', 'null'],
        description:
          'An insert: the record made; an update: the new values of the fields it changed; null for a delete',
      },
      actor: { type: 'string', enum: ['token', 'member', 'database'] },
      token_id: { type: ['string', 'null'], description: 'The workspace token that made it' },
      token_name: { type: ['string', 'null'], description: "That token's label" },
      scope: { type: ['string', 'null'] },
      member: { type: ['string', 'null'], description: 'The signed-in member of the settings page that made it' },
      surface: { type: 'string', enum: ['rest', 'api', 'mcp', 'settings', 'database'] },
      undo_of: { type: ['string', 'null'], description: 'The change this one undid, if it was an undo' },
      request_id: { type: 'string', format: 'uuid', description: 'The changes of one request share it' },
      cascaded: {
        type: 'boolean',
        description: "A delete a foreign key's cascade made (a fund's transactions, deleted with it)",
      },
      bytes: { type: 'integer', description: "What the entry takes of the workspace's activity log" },
    },
    "A change of one of the workspace's records (the activity log)",
  );
}

/** The lookup lists' rows. */
function lookupRecords(): Pick<WrapperSchemas, 'Category' | 'PaymentMethod'> {
  return {
    Category: record(
      {
        id: { type: 'string' },
        name: { type: 'string' },
        for_expenses: { type: 'boolean', description: 'Offered to personal expenses' },
        for_funds: { type: 'boolean', description: 'Offered to fund transactions' },
      },
      'A category (the category_id of an expense or a fund transaction)',
    ),
    PaymentMethod: record(
      { id: { type: 'string' }, name: { type: 'string' } },
      'A payment method (the method_id of a transaction)',
    ),
  };
}

/** The error shape and the token exchange's request and answer. */
function tokenAndErrorSchemas(): Pick<WrapperSchemas, 'Error' | 'TokenRequest' | 'TokenResponse'> {
  return {
    Error: {
      type: 'object',
      description: "The error shape of every Tally surface (PostgREST's)",
      properties: {
        code: { type: 'string', description: 'PGRSTnnn (request, schema, JWT), a Postgres SQLSTATE, or PT429' },
        message: { type: 'string' },
        details: { type: ['string', 'null'] },
        hint: { type: ['string', 'null'] },
      },
      required: ['code', 'message', 'details', 'hint'],
    },
    TokenRequest: {
      type: 'object',
      description: 'Optional: the workspace token for clients that cannot set headers',
      properties: { token: { type: 'string', description: 'A workspace token (tally_ws_…)' } },
    },
    TokenResponse: {
      type: 'object',
      properties: {
        access_token: { type: 'string', description: 'A JWT for Authorization: Bearer' },
        token_type: { type: 'string', const: 'Bearer' },
        expires_in: { type: 'integer', description: 'Seconds until the access token expires (3600)' },
        scope: { type: 'string', enum: ['read', 'write'] },
      },
      required: ['access_token', 'token_type', 'expires_in', 'scope'],
    },
  };
}
