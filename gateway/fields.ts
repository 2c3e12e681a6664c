import type { Lookups } from './lookups.js';

// Every rule on a finance field, once: the JSON Schema (2020-12) of each field, from which the
// /api/v1 wrapper's request schemas (validated by ajv, published in its OpenAPI) and the MCP
// tools' input schemas (validated by the same ajv, published in tools/list) are built; and the
// one sentence each database constraint answers with, on every surface, when a write gets past
// the schemas (/rest/v1 has none) and Postgres refuses it. The SQL CHECKs of the migrations
// enforce the same rules, so every surface answers a value alike: tests/field-rules.test.ts reads
// the constraints from pg_constraint and fails when a rule here and its constraint differ (a
// bound or pattern on one side only, or a value one accepts and the other refuses), and
// tests/mcp-agent.test.ts when a constraint has no sentence here.

export type JsonSchema = Record<string, unknown>;

const FUND_STATUSES = ['Upcoming', 'In Progress', 'Completed'];
const CONTRIBUTION_FREQUENCIES = ['once', 'weekly', 'monthly', 'quarterly', 'yearly'];

/** Bounds of the database's numeric checks (amount < 1e12). */
const AMOUNT_LIMIT = 1e12;
/**
 * Amounts keep at most 4 decimals (scale(amount) <= 4). Not as `multipleOf: 0.0001`: standard
 * validators (ajv, Python's jsonschema) divide in binary floating point, where 19.99 / 0.0001 is
 * 199899.99999999997, and refuse ordinary amounts. Tally's validator counts the decimals of the
 * number as written (the DECIMALS keyword, createAjv); the published schemas leave that keyword
 * out (published()) and say the bound in words, so that every validator accepts every valid amount.
 */
export const DECIMALS = 'x-decimals';
const AMOUNT_DECIMALS = 4;
const PHONE_PATTERN = '^\\+?[0-9 ().-]{3,32}$';
/**
 * An email address: one @, no blanks, and a domain with at least one dot. Letters of any script
 * are allowed (zoë@example.com, an internationalised address); a domain without a dot
 * (ann@localhost) is refused, as no mail from outside reaches it. The same pattern is the CHECK
 * contacts_email_format (sql/app/migrations/000_baseline.sql); JSON Schema's `format: email` (ASCII only)
 * and the database's old pattern (any domain) disagreed on both examples.
 */
const EMAIL_PATTERN = '^[^@\\s]+@[^@\\s.]+(\\.[^@\\s.]+)+$';

/** An enum read from a table; an empty table accepts nothing rather than anything. */
function liveEnum(values: string[], description: string): JsonSchema {
  return values.length > 0
    ? { type: 'string', enum: [...values], description: `${description} (the live list)` }
    : { type: 'string', not: {}, description: `${description} (the list is empty)` };
}

/** A schema as Tally publishes it (tools/list, the OpenAPI documents): without its own DECIMALS keyword. */
export function published<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(published) as T;
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) if (key !== DECIMALS) out[key] = published(value);
  return out as T;
}

/** How many decimals a number has as written: String() is the shortest decimal that reads back as it (1e-7 has 7). */
export function decimalsOf(n: number): number {
  const [digits = '', exponent = '0'] = String(Math.abs(n)).split('e');
  return Math.max(0, (digits.split('.')[1]?.length ?? 0) - Number(exponent));
}

export const uuid = (description: string): JsonSchema => ({ type: 'string', format: 'uuid', description });
const text = (maxLength: number, description: string, minLength = 0): JsonSchema =>
  minLength > 0 ? { type: 'string', minLength, maxLength, description } : { type: 'string', maxLength, description };
/**
 * An idempotency key, as the engine takes it (plan/action.ts): the `Idempotency-Key` header of
 * every POST of /rest/v1 and /api/v1, and the `idempotency_key` argument of the MCP tools that
 * create. One rule for the documents and the tool schemas.
 */
export const IDEMPOTENCY_KEY: JsonSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: '^[!-~]+$',
  description:
    'Makes a create safe to retry: a new random value (a UUID) per create, the same with its retries. ' +
    'Sent again within 24 hours with the same request, it answers what the first answered (same ids) and writes nothing; ' +
    'with a different request it is refused (422). 1 to 255 visible ASCII characters; keys are per workspace.',
};

/** The Idempotency-Key header parameter of a POST, in an OpenAPI 3.1 document. */
export const idempotencyKeyHeader = () => ({
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: IDEMPOTENCY_KEY.description,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: IDEMPOTENCY_KEY.pattern },
});

/** The schema, or null (an enum lists null too: it would refuse it otherwise). */
export const nullable = (schema: JsonSchema): JsonSchema => ({
  ...schema,
  type: [schema.type as string, 'null'],
  ...(Array.isArray(schema.enum) ? { enum: [...(schema.enum as unknown[]), null] } : {}),
});
const dateTime = (description: string): JsonSchema => ({
  type: 'string',
  format: 'date-time',
  description: `${description}; e.g. 2026-03-14T18:30:00Z`,
});
const date = (description: string): JsonSchema => ({
  type: 'string',
  format: 'date',
  description: `${description}; e.g. 2026-03-14`,
});

/** The writable fields of each finance table, with the live enums of `lookups`. */
export function financeFields(lookups: Lookups) {
  return {
    expense: expenseFields(lookups),
    fundTransaction: fundTransactionFields(lookups),
    fund: fundFields(lookups),
    contact: contactFields(),
  };
}

function expenseFields(lookups: Lookups) {
  return {
    name: text(255, 'Expense title or vendor description, 1 to 255 characters', 1),
    amount: {
      type: 'number',
      exclusiveMinimum: 0,
      exclusiveMaximum: AMOUNT_LIMIT,
      [DECIMALS]: AMOUNT_DECIMALS,
      description: 'Amount in the workspace currency, greater than 0 (at most 4 decimals)',
    },
    category_id: liveEnum(lookups.expenseCategories, 'Expense category'),
    method_id: liveEnum(lookups.paymentMethods, 'Payment method'),
    occurred_at: dateTime('When the expense occurred (default: now)'),
    note: text(2000, 'Optional memo, at most 2000 characters'),
  };
}

function fundTransactionFields(lookups: Lookups) {
  return {
    fund_id: uuid('The fund the transaction belongs to'),
    name: text(255, 'Transaction title, 1 to 255 characters', 1),
    amount: {
      type: 'number',
      exclusiveMinimum: -AMOUNT_LIMIT,
      exclusiveMaximum: AMOUNT_LIMIT,
      [DECIMALS]: AMOUNT_DECIMALS,
      not: { const: 0 },
      description:
        'Amount in the fund currency: positive for income (a contribution), negative for an expense payout; never 0 (at most 4 decimals)',
    },
    category_id: liveEnum(lookups.fundCategories, 'Fund category'),
    method_id: liveEnum(lookups.paymentMethods, 'Payment method'),
    occurred_at: dateTime('When it occurred (default: now)'),
  };
}

function fundFields(lookups: Lookups) {
  return {
    name: text(255, 'Fund name, 1 to 255 characters', 1),
    kind: liveEnum(lookups.fundKinds, 'Kind of fund (default Travel)'),
    status: {
      type: 'string',
      enum: FUND_STATUSES,
      description: "Status: 'Upcoming', 'In Progress' or 'Completed' (any may follow any)",
    },
    start_date: date('First day of the fund'),
    end_date: date('Last day of the fund, not before start_date'),
    contribution_amount: {
      type: 'number',
      exclusiveMinimum: 0,
      exclusiveMaximum: AMOUNT_LIMIT,
      description: 'What each participant owes per period',
    },
    contribution_frequency: {
      type: 'string',
      enum: CONTRIBUTION_FREQUENCIES,
      description: 'How often a contribution is due',
    },
    contribution_due_day: {
      type: 'integer',
      minimum: 1,
      maximum: 31,
      description: 'Day of the month (ISO weekday 1-7 for weekly) a contribution is due',
    },
    target_amount: {
      type: 'number',
      minimum: 0,
      exclusiveMaximum: AMOUNT_LIMIT,
      description: 'Budget target in the fund currency, 0 or more',
    },
    currency: {
      type: 'string',
      pattern: '^[A-Z]{3}$',
      description: 'ISO 4217 currency code (default: the workspace currency)',
    },
    description: text(2000, 'What the fund is for, at most 2000 characters'),
  };
}

function contactFields() {
  return {
    name: text(255, 'Full name, 1 to 255 characters', 1),
    nickname: text(255, 'Nickname'),
    phone: {
      type: 'string',
      pattern: PHONE_PATTERN,
      description: 'Phone number: 3 to 32 digits with optional +, spaces, dots, dashes, parentheses',
    },
    email: {
      type: 'string',
      pattern: EMAIL_PATTERN,
      maxLength: 320,
      description:
        'Email address such as ana@example.com: one @, no spaces, a domain with a dot; at most 320 characters',
    },
    gender: text(50, 'Gender (set on creation)'),
    nationality: text(100, 'Nationality (set on creation)'),
  };
}

const tenant = {
  id: { type: 'string', format: 'uuid', description: 'Assigned identifier' },
  workspace_id: { type: 'string', format: 'uuid', description: 'The workspace (from the access token)' },
  created_at: { type: 'string', format: 'date-time', description: 'When the record was created' },
};

/** A record as the gateway returns it: the listed columns (a `select` may narrow them). */
function record(properties: Record<string, JsonSchema>, description: string): JsonSchema {
  return { type: 'object', description, properties };
}

/** The finance records as the gateway answers them, with formats and descriptions. */
export function financeRecords() {
  const expense = record(
    {
      id: tenant.id,
      workspace_id: tenant.workspace_id,
      name: { type: 'string' },
      amount: { type: 'number', description: 'In the workspace currency' },
      category_id: { type: 'string' },
      method_id: { type: 'string' },
      occurred_at: { type: 'string', format: 'date-time' },
      note: { type: ['string', 'null'] },
      created_at: tenant.created_at,
    },
    'A personal expense',
  );
  const fundTransaction = record(
    {
      id: tenant.id,
      workspace_id: tenant.workspace_id,
      fund_id: { type: 'string', format: 'uuid' },
      name: { type: 'string' },
      amount: { type: 'number', description: 'In the fund currency: positive is income, negative an expense' },
      category_id: { type: 'string' },
      method_id: { type: 'string' },
      occurred_at: { type: 'string', format: 'date-time' },
      created_at: tenant.created_at,
    },
    'A transaction of a fund: positive is income, negative an expense',
  );
  const fundProperties = {
    id: tenant.id,
    workspace_id: tenant.workspace_id,
    name: { type: 'string' },
    kind: { type: 'string' },
    status: { type: 'string', enum: FUND_STATUSES },
    start_date: { type: ['string', 'null'], format: 'date' },
    end_date: { type: ['string', 'null'], format: 'date' },
    contribution_amount: { type: ['number', 'null'], description: 'In the fund currency' },
    contribution_frequency: { type: ['string', 'null'] },
    contribution_due_day: { type: ['integer', 'null'] },
    target_amount: { type: ['number', 'null'], description: 'In the fund currency' },
    currency: { type: 'string', description: "ISO 4217 code of the fund's amounts" },
    description: { type: ['string', 'null'] },
    created_at: tenant.created_at,
  };
  const contact = record(
    {
      id: tenant.id,
      workspace_id: tenant.workspace_id,
      name: { type: 'string' },
      nickname: { type: ['string', 'null'] },
      phone: { type: ['string', 'null'] },
      email: { type: ['string', 'null'] },
      gender: { type: ['string', 'null'] },
      nationality: { type: ['string', 'null'] },
      created_at: tenant.created_at,
    },
    'A member or participant of the workspace directory',
  );
  const participant = {
    ...contact,
    description: 'A contact taking part in a fund',
    properties: { ...(contact.properties as object), joined_at: { type: 'string', format: 'date-time' } },
  };
  return { expense, fundTransaction, fundProperties, contact, participant };
}

// ---- Database constraints → one sentence naming the field ----------------------------------

const AMOUNT = `must be less than ${AMOUNT_LIMIT.toExponential()} in absolute value, with at most 4 decimal places`;

/** Each constraint of the finance tables, as the sentence a client reads. */
export const CONSTRAINT_MESSAGES: Record<string, string> = {
  personal_transactions_name_length: 'name must be 1 to 255 characters',
  personal_transactions_amount_positive: 'amount must be greater than 0',
  personal_transactions_amount_bounds: `amount ${AMOUNT}`,
  personal_transactions_note_length: 'note must be at most 2000 characters',
  personal_transactions_occurred_at_finite:
    'occurred_at must be a real date and time, such as 2026-03-14T18:30:00Z (not infinity)',
  personal_transactions_category_id_fkey: 'category_id must be one of the expense categories (see the live list)',
  personal_transactions_method_id_fkey: 'method_id must be one of the payment methods (see the live list)',
  contacts_name_length: 'name must be 1 to 255 characters',
  contacts_nickname_length: 'nickname must be at most 255 characters',
  contacts_phone_format:
    'phone must be 3 to 32 digits with optional +, spaces, dots, dashes and parentheses, such as +44 20 7946 0958',
  contacts_email_format: 'email must be an email address of at most 320 characters, such as ana@example.com',
  contacts_gender_length: 'gender must be at most 50 characters',
  contacts_nationality_length: 'nationality must be at most 100 characters',
  funds_name_length: 'name must be 1 to 255 characters',
  funds_kind_fkey: 'kind must be one of the fund kinds (see the live list)',
  funds_status_check: `status must be one of: ${FUND_STATUSES.join(', ')}`,
  funds_contribution_amount_positive: 'contribution_amount must be greater than 0',
  funds_contribution_frequency_check: `contribution_frequency must be one of: ${CONTRIBUTION_FREQUENCIES.join(', ')}`,
  funds_contribution_due_day_check: 'contribution_due_day must be 1 to 31',
  funds_target_amount_not_negative: 'target_amount must be 0 or more',
  funds_target_amount_bounds: `target_amount must be less than ${AMOUNT_LIMIT.toExponential()}`,
  funds_contribution_amount_bounds: `contribution_amount must be less than ${AMOUNT_LIMIT.toExponential()}`,
  funds_currency_iso4217: 'currency must be an ISO 4217 code of three capital letters, such as EUR',
  funds_description_length: 'description must be at most 2000 characters',
  funds_end_not_before_start: 'end_date must not be before start_date',
  funds_start_date_finite: 'start_date must be a real day, such as 2026-03-14 (not infinity)',
  funds_end_date_finite: 'end_date must be a real day, such as 2026-03-14 (not infinity)',
  funds_contribution_schedule_complete:
    'contribution_amount, contribution_frequency and contribution_due_day must be given together',
  funds_contribution_weekday:
    'contribution_due_day must be an ISO weekday 1 to 7 when contribution_frequency is weekly',
  fund_transactions_name_length: 'name must be 1 to 255 characters',
  fund_transactions_amount_not_zero: 'amount must not be 0',
  fund_transactions_amount_bounds: `amount ${AMOUNT}`,
  fund_transactions_occurred_at_finite:
    'occurred_at must be a real date and time, such as 2026-03-14T18:30:00Z (not infinity)',
  fund_transactions_category_id_fkey: 'category_id must be one of the fund categories (see the live list)',
  fund_transactions_method_id_fkey: 'method_id must be one of the payment methods (see the live list)',
  fund_transactions_fund_id_fkey: 'fund_id must be the id of a fund of this workspace (list the funds for their ids)',
  fund_participants_fund_id_fkey: 'fund_id must be the id of a fund of this workspace (list the funds for their ids)',
  fund_participants_contact_id_fkey:
    'contact_id must be the id of a contact of this workspace (list the contacts for their ids)',
  fund_participants_pkey: 'contact_id already takes part in this fund',
};

/** What a Postgres error carries that names the broken rule. */
interface ConstraintError {
  code: string;
  message: string;
  constraint_name?: string;
}

/**
 * The sentence for a refused write: a named constraint (23xxx) of the finance tables, or a date
 * or number Postgres could not take (22008 out of range, 22007 bad format, 22003 overflow).
 * Undefined for anything else, which keeps Postgres's own message.
 */
export function constraintMessage(err: ConstraintError): string | undefined {
  if (err.constraint_name && err.code.startsWith('23')) {
    const known = CONSTRAINT_MESSAGES[err.constraint_name];
    // A category or method the trigger refused names the value, and its details list the
    // allowed ones: keep the trigger's own message.
    if (known && !/^(category_id|method_id) "/.test(err.message)) return known;
  }
  const value = /: "([^"]*)"$/.exec(err.message)?.[1];
  if (err.code === '22008')
    return `${value ? `"${value}"` : 'A date'} is not a real date and time: use an ISO 8601 date-time such as 2026-03-14T18:30:00Z`;
  if (err.code === '22007')
    return `${value ? `"${value}"` : 'A value'} is not a date or time: use an ISO 8601 date-time such as 2026-03-14T18:30:00Z`;
  if (err.code === '22003') return `A number is out of range: amounts ${AMOUNT}`;
  return undefined;
}
