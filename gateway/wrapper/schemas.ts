import type { Lookups } from '../lookups.js';

// The JSON Schemas of the /api/v1 wrapper (JSON Schema 2020-12, the dialect of OpenAPI 3.1).
// One function of the live lookups builds them; ajv validates request bodies with these very
// objects and the OpenAPI document publishes them, so the documented enums are the enforced
// ones. Request schemas are self-contained (no $ref) so that ajv compiles each on its own.

export type JsonSchema = Record<string, unknown>;

export const FUND_STATUSES = ['Upcoming', 'In Progress', 'Completed'];
export const CONTRIBUTION_FREQUENCIES = ['once', 'weekly', 'monthly', 'quarterly', 'yearly'];

/** Bounds of the database's numeric checks (amount < 1e12). */
const AMOUNT_LIMIT = 1e12;
/** Amounts keep at most 4 decimals (scale(amount) <= 4); ajv checks it with multipleOfPrecision. */
export const AMOUNT_STEP = 0.0001;

/** An enum read from a table; an empty table accepts nothing rather than anything. */
function liveEnum(values: string[], description: string): JsonSchema {
  return values.length > 0
    ? { type: 'string', enum: [...values], description: `${description}. One of: ${values.join(', ')} (the live list)` }
    : { type: 'string', not: {}, description: `${description} (the list is empty)` };
}

const uuid = (description: string): JsonSchema => ({ type: 'string', format: 'uuid', description });
const text = (maxLength: number, description: string, minLength = 0): JsonSchema =>
  minLength > 0 ? { type: 'string', minLength, maxLength, description } : { type: 'string', maxLength, description };
const nullable = (schema: JsonSchema): JsonSchema => ({ ...schema, type: [schema.type as string, 'null'] });
const dateTime = (description: string): JsonSchema => ({
  type: 'string', format: 'date-time', description: `${description}; ISO 8601 date-time with a time zone, e.g. 2026-03-14T18:30:00Z`,
});
const date = (description: string): JsonSchema => ({ type: 'string', format: 'date', description: `${description}; ISO 8601 date, e.g. 2026-03-14` });

function object(properties: Record<string, JsonSchema>, required: string[], description: string): JsonSchema {
  return { type: 'object', description, properties, required, additionalProperties: false };
}

/** An update: every field optional, at least one given. */
function patch(properties: Record<string, JsonSchema>, description: string): JsonSchema {
  return { type: 'object', description, properties, minProperties: 1, additionalProperties: false };
}

/** A record as the gateway returns it: the listed columns (a `select` may narrow them). */
function record(properties: Record<string, JsonSchema>, description: string): JsonSchema {
  return { type: 'object', description, properties };
}

export interface WrapperSchemas {
  // request bodies (validated by ajv)
  ExpenseCreate: JsonSchema;
  ExpenseUpdate: JsonSchema;
  FundTransactionCreate: JsonSchema;
  FundTransactionUpdate: JsonSchema;
  FundCreate: JsonSchema;
  FundUpdate: JsonSchema;
  ContactCreate: JsonSchema;
  ContactUpdate: JsonSchema;
  // responses (documented)
  Expense: JsonSchema;
  FundTransaction: JsonSchema;
  Fund: JsonSchema;
  FundWithTransactions: JsonSchema;
  FundDetail: JsonSchema;
  Contact: JsonSchema;
  Participant: JsonSchema;
  Category: JsonSchema;
  PaymentMethod: JsonSchema;
  Error: JsonSchema;
  TokenRequest: JsonSchema;
  TokenResponse: JsonSchema;
}

export type RequestSchemaName = 'ExpenseCreate' | 'ExpenseUpdate' | 'FundTransactionCreate' | 'FundTransactionUpdate'
  | 'FundCreate' | 'FundUpdate' | 'ContactCreate' | 'ContactUpdate';

export const REQUEST_SCHEMAS: RequestSchemaName[] = [
  'ExpenseCreate', 'ExpenseUpdate', 'FundTransactionCreate', 'FundTransactionUpdate', 'FundCreate', 'FundUpdate', 'ContactCreate', 'ContactUpdate',
];

export function wrapperSchemas(lookups: Lookups): WrapperSchemas {
  const expenseFields = {
    name: text(255, 'Expense title or vendor description, 1 to 255 characters', 1),
    amount: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: AMOUNT_LIMIT, multipleOf: AMOUNT_STEP, description: 'Amount in the workspace currency, greater than 0 (at most 4 decimals)' },
    category_id: liveEnum(lookups.expenseCategories, 'Expense category'),
    method_id: liveEnum(lookups.paymentMethods, 'Payment method'),
    occurred_at: dateTime('When the expense occurred (default: now)'),
    note: text(2000, 'Optional memo, at most 2000 characters'),
  };
  const fundTransactionFields = {
    fund_id: uuid('The fund the transaction belongs to'),
    name: text(255, 'Transaction title, 1 to 255 characters', 1),
    amount: {
      type: 'number', exclusiveMinimum: -AMOUNT_LIMIT, exclusiveMaximum: AMOUNT_LIMIT, multipleOf: AMOUNT_STEP, not: { const: 0 },
      description: 'Positive for income (a contribution), negative for an expense payout; never 0 (at most 4 decimals)',
    },
    category_id: liveEnum(lookups.fundCategories, 'Fund category'),
    method_id: liveEnum(lookups.paymentMethods, 'Payment method'),
    occurred_at: dateTime('When it occurred (default: now)'),
  };
  const fundFields = {
    name: text(255, 'Fund name, 1 to 255 characters', 1),
    kind: liveEnum(lookups.fundKinds, 'Kind of fund (default Travel)'),
    status: { type: 'string', enum: FUND_STATUSES, description: "Status: 'Upcoming', 'In Progress' or 'Completed' (any may follow any)" },
    start_date: date('First day of the fund'),
    end_date: date('Last day of the fund, not before start_date'),
    contribution_amount: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: AMOUNT_LIMIT, description: 'What each participant owes per period' },
    contribution_frequency: { type: 'string', enum: CONTRIBUTION_FREQUENCIES, description: 'How often a contribution is due' },
    contribution_due_day: { type: 'integer', minimum: 1, maximum: 31, description: 'Day of the month (ISO weekday 1-7 for weekly) a contribution is due' },
    target_amount: { type: 'number', minimum: 0, exclusiveMaximum: AMOUNT_LIMIT, description: 'Budget target, 0 or more' },
    currency: { type: 'string', pattern: '^[A-Z]{3}$', description: 'ISO 4217 currency code (default: the workspace currency)' },
    description: text(2000, 'What the fund is for, at most 2000 characters'),
  };
  const contactFields = {
    name: text(255, 'Full name, 1 to 255 characters', 1),
    nickname: text(255, 'Nickname'),
    phone: { type: 'string', pattern: '^\\+?[0-9 ().-]{3,32}$', description: 'Phone number: digits with optional +, spaces, dots, dashes, parentheses' },
    email: { type: 'string', format: 'email', maxLength: 320, description: 'Email address' },
    gender: text(50, 'Gender (set on creation)'),
    nationality: text(100, 'Nationality (set on creation)'),
  };

  const tenant = {
    id: { type: 'string', format: 'uuid', description: 'Assigned identifier' },
    workspace_id: { type: 'string', format: 'uuid', description: 'The workspace (from the access token)' },
    created_at: { type: 'string', format: 'date-time', description: 'When the record was created' },
  };
  const Expense = record({
    id: tenant.id, workspace_id: tenant.workspace_id,
    name: { type: 'string' }, amount: { type: 'number' }, category_id: { type: 'string' }, method_id: { type: 'string' },
    occurred_at: { type: 'string', format: 'date-time' }, note: { type: ['string', 'null'] }, created_at: tenant.created_at,
  }, 'A personal expense');
  const FundTransaction = record({
    id: tenant.id, workspace_id: tenant.workspace_id, fund_id: { type: 'string', format: 'uuid' },
    name: { type: 'string' }, amount: { type: 'number' }, category_id: { type: 'string' }, method_id: { type: 'string' },
    occurred_at: { type: 'string', format: 'date-time' }, created_at: tenant.created_at,
  }, 'A transaction of a fund: positive is income, negative an expense');
  const fundProperties = {
    id: tenant.id, workspace_id: tenant.workspace_id,
    name: { type: 'string' }, kind: { type: 'string' }, status: { type: 'string', enum: FUND_STATUSES },
    start_date: { type: ['string', 'null'], format: 'date' }, end_date: { type: ['string', 'null'], format: 'date' },
    contribution_amount: { type: ['number', 'null'] }, contribution_frequency: { type: ['string', 'null'] },
    contribution_due_day: { type: ['integer', 'null'] }, target_amount: { type: ['number', 'null'] },
    currency: { type: 'string' }, description: { type: ['string', 'null'] }, created_at: tenant.created_at,
  };
  const Contact = record({
    id: tenant.id, workspace_id: tenant.workspace_id, name: { type: 'string' }, nickname: { type: ['string', 'null'] },
    phone: { type: ['string', 'null'] }, email: { type: ['string', 'null'] }, gender: { type: ['string', 'null'] },
    nationality: { type: ['string', 'null'] }, created_at: tenant.created_at,
  }, 'A member or participant of the workspace directory');
  const Participant = { ...Contact, description: 'A contact taking part in a fund', properties: { ...(Contact.properties as object), joined_at: { type: 'string', format: 'date-time' } } };

  return {
    ExpenseCreate: object(expenseFields, ['name', 'amount', 'category_id', 'method_id'], 'A new personal expense'),
    ExpenseUpdate: patch({ ...expenseFields, note: nullable(expenseFields.note) }, 'Fields of an expense to change; others stay as they are'),
    FundTransactionCreate: object(fundTransactionFields, ['fund_id', 'name', 'amount', 'category_id', 'method_id'], 'A new fund transaction'),
    FundTransactionUpdate: patch(
      { name: fundTransactionFields.name, amount: fundTransactionFields.amount, category_id: fundTransactionFields.category_id,
        method_id: fundTransactionFields.method_id, occurred_at: fundTransactionFields.occurred_at },
      'Fields of a fund transaction to change (it stays in its fund)'),
    FundCreate: object(
      { name: fundFields.name, kind: fundFields.kind, currency: fundFields.currency, target_amount: fundFields.target_amount,
        description: fundFields.description, start_date: fundFields.start_date, end_date: fundFields.end_date,
        contribution_amount: fundFields.contribution_amount, contribution_frequency: fundFields.contribution_frequency,
        contribution_due_day: fundFields.contribution_due_day },
      ['name'], 'A new fund; its status starts as Upcoming'),
    FundUpdate: patch(
      { name: fundFields.name, status: fundFields.status, kind: fundFields.kind, target_amount: nullable(fundFields.target_amount),
        description: nullable(fundFields.description), start_date: nullable(fundFields.start_date), end_date: nullable(fundFields.end_date) },
      'Fields of a fund to change; status may be set to any of the three values'),
    ContactCreate: object(contactFields, ['name'], 'A new contact'),
    ContactUpdate: patch(
      { name: contactFields.name, nickname: nullable(contactFields.nickname), phone: nullable(contactFields.phone), email: nullable(contactFields.email) },
      'Fields of a contact to change (null clears an optional one)'),

    Expense,
    FundTransaction,
    Fund: record(fundProperties, 'A group fund; it has no stored balance'),
    FundWithTransactions: record(
      { ...fundProperties, fund_transactions: { type: 'array', items: FundTransaction, description: 'The fund\'s transactions (embedded)' } },
      'A fund with its embedded transactions (the default select of GET /funds)'),
    FundDetail: record(
      { ...fundProperties, balance: { type: 'number', description: 'Sum of the amounts of the fund\'s transactions, computed on read (summary.balance)' },
        summary: {
          type: 'object', description: 'The fund\'s figures from the SQL function fund_summary (also GET /rest/v1/rpc/fund_summary?fund_id=…)',
          properties: {
            balance: { type: 'number', description: 'Income minus expenses' },
            income: { type: 'number', description: 'Sum of the positive transactions' },
            expenses: { type: 'number', description: 'Sum of the negative transactions, as a positive number' },
            progress: { type: ['number', 'null'], description: 'Balance divided by the target amount, rounded to 4 places; null without a target' },
            participant_count: { type: 'integer', description: 'How many contacts take part' },
          },
          required: ['balance', 'income', 'expenses', 'progress', 'participant_count'],
        },
        fund_transactions: { type: 'array', items: FundTransaction, description: 'The ledger, newest first' },
        participants: { type: 'array', items: Participant, description: 'The contacts taking part, with when they joined' } },
      'One fund with its balance and figures, ledger and participants'),
    Contact,
    Participant,
    Category: record({
      id: { type: 'string' }, name: { type: 'string' },
      for_expenses: { type: 'boolean', description: 'Offered to personal expenses' }, for_funds: { type: 'boolean', description: 'Offered to fund transactions' },
    }, 'A category (the category_id of an expense or a fund transaction)'),
    PaymentMethod: record({ id: { type: 'string' }, name: { type: 'string' } }, 'A payment method (the method_id of a transaction)'),
    Error: {
      type: 'object', description: 'The error shape of every Tally surface (PostgREST\'s)',
      properties: {
        code: { type: 'string', description: 'PGRSTnnn (request, schema, JWT), a Postgres SQLSTATE, or PT429' },
        message: { type: 'string' }, details: { type: ['string', 'null'] }, hint: { type: ['string', 'null'] },
      },
      required: ['code', 'message', 'details', 'hint'],
    },
    TokenRequest: {
      type: 'object', description: 'Optional: the workspace token for clients that cannot set headers',
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
