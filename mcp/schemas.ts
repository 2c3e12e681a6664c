import { financeRecords, type JsonSchema } from '../gateway/fields.js';

// The pieces of the tools' input and output schemas that several tools share, in JSON Schema:
// the field rules themselves come from gateway/fields.ts, like the wrapper's.

export type { JsonSchema };

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A date (whole UTC day) or a date-time, as the list filters accept: the formats say which. */
export const dateOrDateTime = (description: string): JsonSchema => ({
  type: 'string',
  anyOf: [{ format: 'date' }, { format: 'date-time' }],
  description,
});

/** The start of a range: a date means from 00:00 UTC of that day. */
export function rangeStart(value: string): string {
  return DATE.test(value) ? `${value}T00:00:00Z` : value;
}

/** The end of a range, as [operator, value]: a date includes that whole UTC day. */
export function rangeEnd(value: string): ['lt' | 'lte', string] {
  if (!DATE.test(value)) return ['lte', value];
  const next = new Date(`${value}T00:00:00Z`);
  next.setUTCDate(next.getUTCDate() + 1);
  // The day after 9999-12-31 has no ISO form Postgres reads (+010000-…): no moment is after it.
  if (next.getUTCFullYear() > 9999) return ['lte', 'infinity'];
  return ['lt', next.toISOString()];
}

export const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;
// What limit and offset mean, and their defaults, the instructions say once for every list.
export const limit: JsonSchema = { type: 'integer', minimum: 1, maximum: MAX_LIMIT };
export const offset: JsonSchema = { type: 'integer', minimum: 0 };
export const search: JsonSchema = { type: 'string', minLength: 1, maxLength: 200 };

/** What every list answers besides its records: where the next page starts, and the total when it is known. */
export const pageOutput: Record<string, JsonSchema> = {
  limit: { type: 'integer' },
  offset: { type: 'integer' },
  has_more: { type: 'boolean', description: 'Whether more records match after this page' },
  next_offset: { type: ['integer', 'null'], description: 'The offset of the next page; null on the last page' },
  total: {
    type: ['integer', 'null'],
    description:
      'How many records match in all: exact on the last page (offset + records), null while more pages follow (lists never count the whole table)',
  },
};

export const EXPENSE_COLUMNS = 'id,name,amount,category_id,method_id,occurred_at,note';
export const FUND_TRANSACTION_COLUMNS = 'id,fund_id,name,amount,category_id,method_id,occurred_at';
export const CONTACT_COLUMNS = 'id,name,nickname,phone,email,gender,nationality';
export const FUND_COLUMNS =
  'id,name,kind,status,start_date,end_date,contribution_amount,contribution_frequency,contribution_due_day,target_amount,currency,description';

/** A record schema narrowed to the columns the tools select. */
function only(schema: JsonSchema, columns: string, extra: Record<string, JsonSchema> = {}): JsonSchema {
  const all = schema.properties as Record<string, JsonSchema>;
  const properties = Object.fromEntries(columns.split(',').map((c) => [c, all[c]]));
  return { ...schema, properties: { ...properties, ...extra }, required: columns.split(',') };
}

const records = financeRecords();
export const expense = only(records.expense, EXPENSE_COLUMNS);
export const fundTransaction = only(records.fundTransaction, FUND_TRANSACTION_COLUMNS);
export const contact = only(records.contact, CONTACT_COLUMNS);
export const participant = only(records.participant, CONTACT_COLUMNS, {
  joined_at: { type: 'string', format: 'date-time' },
});

const totals: JsonSchema = {
  type: 'object',
  description: "The fund's figures in its currency, computed by Postgres from the ledger",
  properties: {
    balance: { type: 'number', description: 'Sum of all transactions (income minus expenses)' },
    income: { type: 'number', description: 'Sum of the positive transactions' },
    expenses: { type: 'number', description: 'Sum of the negative transactions, as a positive number' },
    progress: {
      type: ['number', 'null'],
      description: 'Balance divided by the target amount (1 = target reached); null without a target',
    },
  },
  required: ['balance', 'income', 'expenses', 'progress'],
};
export const fund: JsonSchema = only(
  { type: 'object', description: 'A group fund', properties: records.fundProperties },
  FUND_COLUMNS,
);
export const fundWithTotals: JsonSchema = {
  ...fund,
  properties: { ...(fund.properties as object), totals },
  required: [...(fund.required as string[]), 'totals'],
};

export const array = (items: JsonSchema, description?: string): JsonSchema => ({
  type: 'array',
  items,
  ...(description ? { description } : {}),
});

/** The tables whose changes the activity log records (sql/app/definitions/activity.sql). */
export const TRACKED_TABLES = ['personal_transactions', 'funds', 'fund_transactions', 'contacts', 'fund_participants'];
export const ACTIVITY_COLUMNS = 'id,at,table_name,record_id,action,before,after,actor,token_name,surface,undo_of';
const fields: JsonSchema = { type: 'object', additionalProperties: true };
/**
 * A change as list_activity answers it: compact, what an agent needs to find a change and
 * decide whether to undo it. An update carries only the fields it changed, each as [before,
 * after]; a create or delete the record it made or removed (without workspace_id); who made
 * it is the token's label, and fields that say nothing (null, the workspace) are left out.
 */
export const change: JsonSchema = {
  type: 'object',
  description: "A change of one of the workspace's records",
  properties: {
    id: { type: 'string', format: 'uuid', description: 'The change; undo_change takes it' },
    at: { type: 'string', format: 'date-time' },
    table: { type: 'string', enum: TRACKED_TABLES },
    record_id: { type: 'string', description: "The record's id (a fund participant: fund_id/contact_id)" },
    action: { type: 'string', enum: ['insert', 'update', 'delete'] },
    changed: { ...fields, description: 'An update: each field it changed, as [before, after]' },
    record: { ...fields, description: 'An insert: the record it made; a delete: the record it removed' },
    by: {
      type: 'string',
      description:
        "Who: the label of the workspace token that made it, or 'database' (SQL run in the database) or 'member'",
    },
    surface: { type: 'string', enum: ['rest', 'api', 'mcp', 'settings', 'database'] },
    undo_of: { type: 'string', format: 'uuid', description: 'The change this one undid, when it was an undo' },
  },
  required: ['id', 'at', 'table', 'record_id', 'action', 'by', 'surface'],
};

/** What an undo did to one record: undo_changes's answer, one per record put back. */
export const undoneRecord: JsonSchema = {
  type: 'object',
  properties: {
    undone: { type: 'string', format: 'uuid', description: 'The change undone' },
    table: { type: 'string', enum: TRACKED_TABLES },
    record_id: { type: 'string' },
    action: {
      type: 'string',
      enum: ['insert', 'update', 'delete'],
      description: 'What the undo does to the record: insert brings it back, update reverts it, delete removes it',
    },
    activity_id: {
      type: ['string', 'null'],
      description: "The undo's own change (null in a dry run): undoing it makes the change again",
    },
  },
  required: ['undone', 'table', 'record_id', 'action', 'activity_id'],
};
