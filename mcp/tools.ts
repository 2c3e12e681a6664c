import { z, type ZodRawShape } from 'zod';
import type { Lookups } from '../gateway/lookups.js';
import { TableClient, ToolError, searchFilter } from './gateway-client.js';
import {
  CONTACT_COLUMNS, EXPENSE_COLUMNS, FUND_COLUMNS, FUND_TRANSACTION_COLUMNS, amountPositive, contact, dateOrDateTime, dateTime,
  expense, fund, fundTransaction, limit, liveEnum, name255, offset, rangeEnd, rangeStart, totals, uuid,
} from './schemas.js';

// The 14 tools of SPEC §4.4. Each is a thin translation into one or a few gateway calls under
// the caller's role and workspace claim: RLS, scopes, revocation and the API switch hold as on
// the REST surfaces. Names and parameters are exactly the spec's.

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export interface ToolResult {
  structured: Record<string, unknown>;
  text: string;
}

export interface Tool {
  name: string;
  title: string;
  description: string;
  annotations: ToolAnnotations;
  input(lookups: Lookups): ZodRawShape;
  output: ZodRawShape;
  // Arguments arrive validated against input(); each tool narrows them itself.
  run(args: Record<string, any>, db: TableClient): Promise<ToolResult>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
const CREATE: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
const UPDATE: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false };
const DELETE: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };

const money = (n: number): string => n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 });
const round = (n: number): number => Math.round(n * 10_000) / 10_000;

/** Only the fields the caller gave: update_* changes nothing else. */
function given(args: Record<string, unknown>, fields: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (args[f] !== undefined) out[f] = args[f];
  if (Object.keys(out).length === 0) throw new ToolError(`Give at least one field to change: ${fields.join(', ')}`);
  return out;
}

/** Date range, enum and paging filters shared by the list tools. */
function listQuery(args: Record<string, unknown>, columns: string, filters: Record<string, string | undefined>): URLSearchParams {
  const q = new URLSearchParams({ select: columns, order: 'occurred_at.desc,id.desc', limit: String(args.limit ?? 50), offset: String(args.offset ?? 0) });
  for (const [column, value] of Object.entries(filters)) if (value !== undefined) q.append(column, `eq.${value}`);
  if (typeof args.start_date === 'string') q.append('occurred_at', `gte.${rangeStart(args.start_date)}`);
  if (typeof args.end_date === 'string') {
    const [op, value] = rangeEnd(args.end_date);
    q.append('occurred_at', `${op}.${value}`);
  }
  return q;
}

const dateFilters = {
  start_date: dateOrDateTime('Only records on or after this moment: an ISO date (from 00:00 UTC of that day) or date-time').optional(),
  end_date: dateOrDateTime('Only records on or before this moment: an ISO date (the whole UTC day is included) or date-time').optional(),
};

const pageOutput = { total: z.number().describe('How many records match the filters in all'), limit: z.number(), offset: z.number() };

/** public.fund_figures, as the computed field funds.summary embeds it (sql/051_fund_figures_linear.sql). */
interface FundFigures {
  balance: number;
  income: number;
  expenses: number;
  progress: number | null;
  participant_count: number;
}

interface FundRow extends z.infer<typeof fund> {
  summary: FundFigures;
}

/**
 * The fund's totals as Postgres computes them (fund_summary, one definition for the wrapper, MCP
 * and /rpc); only picked out here, never recomputed.
 */
function fundTotals(row: FundRow): z.infer<typeof totals> {
  const s = row.summary;
  return { balance: Number(s.balance), income: Number(s.income), expenses: Number(s.expenses), progress: s.progress === null ? null : Number(s.progress) };
}

function withoutSummary<T extends FundRow>(row: T): Omit<T, 'summary'> {
  const { summary: _summary, ...rest } = row;
  return rest;
}

const expenseFields = (l: Lookups) => ({
  name: name255.describe('Expense title or vendor description, 1 to 255 characters'),
  amount: amountPositive,
  category_id: liveEnum(l.expenseCategories, 'category_id', 'Expense category'),
  method_id: liveEnum(l.paymentMethods, 'method_id', 'Payment method'),
  occurred_at: dateTime('When the expense occurred, ISO 8601 date-time (default: now)'),
  note: z.string().max(2000).describe('Optional memo'),
});

export const tools: Tool[] = [
  {
    name: 'create_expense',
    title: 'Record an expense',
    description: 'Records a personal expense in the workspace and returns it with its id.',
    annotations: CREATE,
    input: (l) => {
      const f = expenseFields(l);
      return { name: f.name, amount: f.amount, category_id: f.category_id, method_id: f.method_id, occurred_at: f.occurred_at.optional(), note: f.note.optional() };
    },
    output: { expense },
    async run(args, db) {
      const row = await db.insert<z.infer<typeof expense>>('personal_transactions', given(args, ['name', 'amount', 'category_id', 'method_id', 'occurred_at', 'note']), EXPENSE_COLUMNS);
      return { structured: { expense: row }, text: `Recorded expense "${row.name}" of ${money(row.amount)} (${row.category_id}) with id ${row.id}.` };
    },
  },
  {
    name: 'list_expenses',
    title: 'List expenses',
    description:
      'Lists expenses, newest first (by occurred_at), with the total count of matches. Filters: category_id, method_id, ' +
      'start_date/end_date (ISO date = whole UTC day, inclusive; or a date-time), search (case-insensitive substring of ' +
      'name or note). Page with limit (1-1000, default 50) and offset (default 0).',
    annotations: READ,
    input: (l) => ({
      limit: limit.optional(),
      offset: offset.optional(),
      category_id: liveEnum(l.expenseCategories, 'category_id', 'Only this expense category').optional(),
      method_id: liveEnum(l.paymentMethods, 'method_id', 'Only this payment method').optional(),
      ...dateFilters,
      search: z.string().min(1).max(200).describe('Case-insensitive text to find in the name or note').optional(),
    }),
    output: { expenses: z.array(expense), ...pageOutput },
    async run(args, db) {
      const q = listQuery(args, EXPENSE_COLUMNS, { category_id: args.category_id, method_id: args.method_id });
      if (args.search) q.append('or', searchFilter(['name', 'note'], args.search));
      const page = await db.list<z.infer<typeof expense>>('personal_transactions', q, { count: true });
      const total = page.total ?? page.rows.length;
      const structured = { expenses: page.rows, total, limit: args.limit ?? 50, offset: args.offset ?? 0 };
      const sum = round(page.rows.reduce((s, e) => s + e.amount, 0));
      return { structured, text: `${page.rows.length} of ${total} matching expenses (this page sums to ${money(sum)}).` };
    },
  },
  {
    name: 'update_expense',
    title: 'Update an expense',
    description: 'Changes the given fields of an expense; fields left out stay as they are. An unknown id is an error.',
    annotations: UPDATE,
    input: (l) => {
      const f = expenseFields(l);
      return {
        id: uuid('The expense id'),
        name: f.name.optional(), amount: f.amount.optional(), category_id: f.category_id.optional(), method_id: f.method_id.optional(),
        occurred_at: f.occurred_at.optional(), note: f.note.nullable().optional(),
      };
    },
    output: { expense },
    async run(args, db) {
      const row = await db.update<z.infer<typeof expense>>('personal_transactions', args.id, given(args, ['name', 'amount', 'category_id', 'method_id', 'occurred_at', 'note']), EXPENSE_COLUMNS);
      if (!row) throw new ToolError(`No expense with id ${args.id} in this workspace (list_expenses shows the ids).`);
      return { structured: { expense: row }, text: `Updated expense "${row.name}" (${row.id}).` };
    },
  },
  {
    name: 'delete_expense',
    title: 'Delete an expense',
    description: 'Permanently deletes an expense and returns what was deleted. An unknown id is an error.',
    annotations: DELETE,
    input: () => ({ id: uuid('The expense id') }),
    output: { deleted: expense },
    async run(args, db) {
      const row = await db.remove<z.infer<typeof expense>>('personal_transactions', args.id, EXPENSE_COLUMNS);
      if (!row) throw new ToolError(`No expense with id ${args.id} in this workspace (list_expenses shows the ids).`);
      return { structured: { deleted: row }, text: `Deleted expense "${row.name}" of ${money(row.amount)} (${row.id}).` };
    },
  },
  {
    name: 'list_funds',
    title: 'List funds',
    description:
      'Lists every fund of the workspace with its target, and real-time totals computed from its transactions: balance, ' +
      'income, expenses and progress toward the target.',
    annotations: READ,
    input: () => ({}),
    output: { funds: z.array(fund.extend({ totals })) },
    async run(_args, db) {
      // One gateway call: the computed field summary is fund_summary() for each fund.
      const q = new URLSearchParams({ select: `${FUND_COLUMNS},summary`, order: 'created_at.desc,id.asc' });
      const { rows } = await db.list<FundRow>('funds', q);
      const funds = rows.map((r) => ({ ...withoutSummary(r), totals: fundTotals(r) }));
      const lines = funds.map((f) => `- ${f.name} (${f.status}): balance ${money(f.totals.balance)} ${f.currency}` +
        (f.target_amount ? ` of target ${money(f.target_amount)}` : ''));
      return { structured: { funds }, text: funds.length ? `${funds.length} funds:\n${lines.join('\n')}` : 'The workspace has no funds yet.' };
    },
  },
  {
    name: 'get_fund',
    title: 'Get a fund',
    description: 'Full details of one fund: its fields and budget target, its participants, its ledger (newest first) and its totals.',
    annotations: READ,
    input: () => ({ fund_id: uuid('The fund id') }),
    output: {
      fund: fund.extend({ totals }),
      participants: z.array(contact.extend({ joined_at: z.string() })),
      ledger: z.array(fundTransaction),
    },
    async run(args, db) {
      const q = new URLSearchParams({
        select: `${FUND_COLUMNS},summary,fund_transactions(${FUND_TRANSACTION_COLUMNS}),fund_participants(joined_at,contacts(${CONTACT_COLUMNS}))`,
        id: `eq.${args.fund_id}`,
        'fund_transactions.order': 'occurred_at.desc,id.desc',
      });
      const { rows } = await db.list<FundRow & { fund_transactions: z.infer<typeof fundTransaction>[]; fund_participants: { joined_at: string; contacts: z.infer<typeof contact> }[] }>('funds', q);
      const row = rows[0];
      if (!row) throw new ToolError(`No fund with id ${args.fund_id} in this workspace (list_funds shows the ids).`);
      const participants = row.fund_participants.map((p) => ({ ...p.contacts, joined_at: p.joined_at }));
      const { fund_transactions: ledger, fund_participants: _joins, ...fields } = withoutSummary(row);
      const structured = { fund: { ...fields, totals: fundTotals(row) }, participants, ledger };
      const t = structured.fund.totals;
      return {
        structured,
        text: `${row.name} (${row.kind}, ${row.status}): balance ${money(t.balance)} ${row.currency}, income ${money(t.income)}, ` +
          `expenses ${money(t.expenses)}${row.target_amount ? `, ${Math.round((t.progress ?? 0) * 100)}% of target ${money(row.target_amount)}` : ''}; ` +
          `${participants.length} participants, ${row.fund_transactions.length} transactions.`,
      };
    },
  },
  {
    name: 'create_fund',
    title: 'Create a fund',
    description: 'Creates a collective fund (a trip, a sports season, an event budget). Its status starts as Upcoming; the currency defaults to the workspace currency.',
    annotations: CREATE,
    input: (l) => ({
      name: name255.describe('Fund name, 1 to 255 characters'),
      kind: liveEnum(l.fundKinds, 'kind', 'Kind of fund (default Travel)').optional(),
      currency: z.string().regex(/^[A-Z]{3}$/, { message: 'currency must be an ISO 4217 code such as EUR' }).describe('ISO 4217 currency code').optional(),
      target_amount: z.number().min(0).lt(1e12).describe('Budget target, 0 or more').optional(),
      description: z.string().max(2000).describe('What the fund is for').optional(),
    }),
    output: { fund },
    async run(args, db) {
      const row = await db.insert<z.infer<typeof fund>>('funds', given(args, ['name', 'kind', 'currency', 'target_amount', 'description']), FUND_COLUMNS);
      return { structured: { fund: row }, text: `Created fund "${row.name}" (${row.kind}, ${row.currency}) with id ${row.id}.` };
    },
  },
  {
    name: 'update_fund',
    title: 'Update a fund',
    description: "Changes the given fields of a fund. status may be set to any of 'Upcoming', 'In Progress', 'Completed' (no transition rule).",
    annotations: UPDATE,
    input: () => ({
      fund_id: uuid('The fund id'),
      name: name255.describe('Fund name').optional(),
      status: z.enum(['Upcoming', 'In Progress', 'Completed'], { message: "status must be one of: Upcoming, In Progress, Completed" }).describe("One of 'Upcoming', 'In Progress', 'Completed'").optional(),
      target_amount: z.number().min(0).lt(1e12).nullable().describe('Budget target, 0 or more (null clears it)').optional(),
      description: z.string().max(2000).nullable().describe('What the fund is for').optional(),
    }),
    output: { fund },
    async run(args, db) {
      const row = await db.update<z.infer<typeof fund>>('funds', args.fund_id, given(args, ['name', 'status', 'target_amount', 'description']), FUND_COLUMNS);
      if (!row) throw new ToolError(`No fund with id ${args.fund_id} in this workspace (list_funds shows the ids).`);
      return { structured: { fund: row }, text: `Updated fund "${row.name}" (${row.status}).` };
    },
  },
  {
    name: 'create_fund_transaction',
    title: 'Record a fund transaction',
    description: 'Records income (a contribution: positive amount) or an expense payout (negative amount) against a fund.',
    annotations: CREATE,
    input: (l) => ({
      fund_id: uuid('The fund id'),
      name: name255.describe('Transaction title, 1 to 255 characters'),
      amount: z.number().refine((n) => n !== 0, { message: 'amount must not be 0' }).refine((n) => Math.abs(n) < 1e12, { message: 'amount is too large' })
        .describe('Positive for income (a contribution), negative for an expense payout; never 0'),
      category_id: liveEnum(l.fundCategories, 'category_id', 'Fund category'),
      method_id: liveEnum(l.paymentMethods, 'method_id', 'Payment method'),
      occurred_at: dateTime('When it occurred, ISO 8601 date-time (default: now)').optional(),
    }),
    output: { transaction: fundTransaction },
    async run(args, db) {
      const row = await db.insert<z.infer<typeof fundTransaction>>('fund_transactions', given(args, ['fund_id', 'name', 'amount', 'category_id', 'method_id', 'occurred_at']), FUND_TRANSACTION_COLUMNS);
      return { structured: { transaction: row }, text: `Recorded ${row.amount > 0 ? 'income' : 'expense'} "${row.name}" of ${money(Math.abs(row.amount))} on fund ${row.fund_id} (id ${row.id}).` };
    },
  },
  {
    name: 'list_fund_transactions',
    title: 'List fund transactions',
    description:
      'Lists fund transactions, newest first, with the total count of matches: of one fund (fund_id) or of all funds. ' +
      'Filters: category_id, start_date/end_date (ISO date = whole UTC day, inclusive; or a date-time). Page with limit (1-1000, default 50) and offset.',
    annotations: READ,
    input: (l) => ({
      fund_id: uuid('Only transactions of this fund').optional(),
      limit: limit.optional(),
      offset: offset.optional(),
      category_id: liveEnum(l.fundCategories, 'category_id', 'Only this fund category').optional(),
      ...dateFilters,
    }),
    output: { transactions: z.array(fundTransaction), ...pageOutput },
    async run(args, db) {
      const q = listQuery(args, FUND_TRANSACTION_COLUMNS, { fund_id: args.fund_id, category_id: args.category_id });
      const page = await db.list<z.infer<typeof fundTransaction>>('fund_transactions', q, { count: true });
      const total = page.total ?? page.rows.length;
      return {
        structured: { transactions: page.rows, total, limit: args.limit ?? 50, offset: args.offset ?? 0 },
        text: `${page.rows.length} of ${total} matching fund transactions.`,
      };
    },
  },
  {
    name: 'delete_fund_transaction',
    title: 'Delete a fund transaction',
    description: 'Permanently deletes a fund transaction and returns what was deleted. An unknown id is an error.',
    annotations: DELETE,
    input: () => ({ id: uuid('The fund transaction id') }),
    output: { deleted: fundTransaction },
    async run(args, db) {
      const row = await db.remove<z.infer<typeof fundTransaction>>('fund_transactions', args.id, FUND_TRANSACTION_COLUMNS);
      if (!row) throw new ToolError(`No fund transaction with id ${args.id} in this workspace (list_fund_transactions shows the ids).`);
      return { structured: { deleted: row }, text: `Deleted fund transaction "${row.name}" of ${money(row.amount)} (${row.id}).` };
    },
  },
  {
    name: 'list_contacts',
    title: 'List contacts',
    description: 'Lists the roster of members and participants by name; search is a case-insensitive substring of name, nickname or phone.',
    annotations: READ,
    input: () => ({ search: z.string().min(1).max(200).describe('Text to find in the name, nickname or phone').optional() }),
    output: { contacts: z.array(contact) },
    async run(args, db) {
      const q = new URLSearchParams({ select: CONTACT_COLUMNS, order: 'name.asc,id.asc' });
      if (args.search) q.append('or', searchFilter(['name', 'nickname', 'phone'], args.search));
      const { rows } = await db.list<z.infer<typeof contact>>('contacts', q);
      return { structured: { contacts: rows }, text: rows.length ? `${rows.length} contacts: ${rows.map((c) => c.name).join(', ')}.` : 'No contact matches.' };
    },
  },
  {
    name: 'create_contact',
    title: 'Add a contact',
    description: 'Adds a member or participant to the workspace roster.',
    annotations: CREATE,
    input: () => ({
      name: name255.describe('Full name'),
      nickname: z.string().max(255).describe('Nickname').optional(),
      phone: z.string().max(32).describe('Phone number, digits with optional +, spaces, dots, dashes, parentheses').optional(),
      email: z.string().email({ message: 'email must be an email address' }).describe('Email address').optional(),
      gender: z.string().max(50).describe('Gender').optional(),
      nationality: z.string().max(100).describe('Nationality').optional(),
    }),
    output: { contact },
    async run(args, db) {
      const row = await db.insert<z.infer<typeof contact>>('contacts', given(args, ['name', 'nickname', 'phone', 'email', 'gender', 'nationality']), CONTACT_COLUMNS);
      return { structured: { contact: row }, text: `Added contact "${row.name}" with id ${row.id}.` };
    },
  },
  {
    name: 'update_contact',
    title: 'Update a contact',
    description: 'Changes the given fields of a contact; fields left out stay as they are. An unknown id is an error.',
    annotations: UPDATE,
    input: () => ({
      id: uuid('The contact id'),
      name: name255.describe('Full name').optional(),
      nickname: z.string().max(255).nullable().describe('Nickname (null clears it)').optional(),
      phone: z.string().max(32).nullable().describe('Phone number (null clears it)').optional(),
      email: z.string().email({ message: 'email must be an email address' }).nullable().describe('Email address (null clears it)').optional(),
    }),
    output: { contact },
    async run(args, db) {
      const row = await db.update<z.infer<typeof contact>>('contacts', args.id, given(args, ['name', 'nickname', 'phone', 'email']), CONTACT_COLUMNS);
      if (!row) throw new ToolError(`No contact with id ${args.id} in this workspace (list_contacts shows the ids).`);
      return { structured: { contact: row }, text: `Updated contact "${row.name}" (${row.id}).` };
    },
  },
];
