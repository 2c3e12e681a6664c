import { z } from 'zod';

// The pieces of the tools' input and output schemas that several tools share.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

export const uuid = (what: string) => z.string().regex(UUID, { message: `${what} must be a UUID` }).describe(`${what} (UUID)`);

const validDate = (s: string): boolean => !Number.isNaN(Date.parse(DATE.test(s) ? `${s}T00:00:00Z` : s));

export const dateTime = (description: string) =>
  z.string().regex(DATE_TIME, { message: 'must be an ISO 8601 date-time such as 2026-03-14T18:30:00Z' })
    .refine(validDate, { message: 'is not a real date-time' }).describe(description);

/** A date (whole UTC day) or a date-time, as the list filters accept. */
export const dateOrDateTime = (description: string) =>
  z.string().refine((s) => (DATE.test(s) || DATE_TIME.test(s)) && validDate(s), {
    message: 'must be an ISO date (2026-03-14) or date-time (2026-03-14T18:30:00Z)',
  }).describe(description);

/** The start of a range: a date means from 00:00 UTC of that day. */
export function rangeStart(value: string): string {
  return DATE.test(value) ? `${value}T00:00:00Z` : value;
}

/** The end of a range, as [operator, value]: a date includes that whole UTC day. */
export function rangeEnd(value: string): ['lt' | 'lte', string] {
  if (!DATE.test(value)) return ['lte', value];
  const next = new Date(`${value}T00:00:00Z`);
  next.setUTCDate(next.getUTCDate() + 1);
  return ['lt', next.toISOString()];
}

/** An enum read live from the database; the error lists the allowed values. */
export function liveEnum(values: string[], field: string, description: string) {
  const allowed = values.join(', ');
  if (values.length === 0) return z.never().describe(description);
  return z.enum(values as [string, ...string[]], { message: `${field} must be one of: ${allowed}` }).describe(`${description}. One of: ${allowed}`);
}

export const limit = z.number().int().min(1).max(1000).default(50).describe('How many records to return, 1 to 1000 (default 50)');
export const offset = z.number().int().min(0).default(0).describe('How many matching records to skip, for paging (default 0)');

export const amountPositive = z.number().positive().lt(1e12).describe('Amount in the workspace currency, greater than 0');
export const name255 = z.string().min(1).max(255);

export const expense = z.object({
  id: z.string(),
  name: z.string(),
  amount: z.number(),
  category_id: z.string(),
  method_id: z.string(),
  occurred_at: z.string(),
  note: z.string().nullable(),
});
export const EXPENSE_COLUMNS = 'id,name,amount,category_id,method_id,occurred_at,note';

export const fundTransaction = z.object({
  id: z.string(),
  fund_id: z.string(),
  name: z.string(),
  amount: z.number(),
  category_id: z.string(),
  method_id: z.string(),
  occurred_at: z.string(),
});
export const FUND_TRANSACTION_COLUMNS = 'id,fund_id,name,amount,category_id,method_id,occurred_at';

export const contact = z.object({
  id: z.string(),
  name: z.string(),
  nickname: z.string().nullable(),
  phone: z.string().nullable(),
  email: z.string().nullable(),
  gender: z.string().nullable(),
  nationality: z.string().nullable(),
});
export const CONTACT_COLUMNS = 'id,name,nickname,phone,email,gender,nationality';

export const fund = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.string(),
  status: z.enum(['Upcoming', 'In Progress', 'Completed']),
  start_date: z.string().nullable(),
  end_date: z.string().nullable(),
  contribution_amount: z.number().nullable(),
  contribution_frequency: z.string().nullable(),
  contribution_due_day: z.number().nullable(),
  target_amount: z.number().nullable(),
  currency: z.string(),
  description: z.string().nullable(),
});
export const FUND_COLUMNS = 'id,name,kind,status,start_date,end_date,contribution_amount,contribution_frequency,contribution_due_day,target_amount,currency,description';

export const totals = z.object({
  balance: z.number().describe('Sum of all transactions (income minus expenses)'),
  income: z.number().describe('Sum of the positive transactions'),
  expenses: z.number().describe('Sum of the negative transactions, as a positive number'),
  progress: z.number().nullable().describe('Balance divided by the target amount (1 = target reached); null without a target'),
});
