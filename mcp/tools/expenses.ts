import { nullable, uuid } from '../../gateway/fields.js';
import { ToolError, searchFilter } from '../gateway-client.js';
import { DEFAULT_LIMIT, EXPENSE_COLUMNS, array, expense, search, pageOutput } from '../schemas.js';
import { CREATE, DELETE, READ, UPDATE, tool, type Tool } from './tool.js';
import {
  terse,
  dateFilters,
  given,
  listQuery,
  money,
  notFound,
  pageFields,
  pageText,
  paging,
  round,
  type ById,
  type DateRange,
  type Paging,
} from './shared.js';
import { changeOutput, changesOutput, undoable, undoableAll } from './undoable.js';

// Personal expenses (personal_transactions): record one or many, list, sum, change, delete.

interface Expense {
  id: string;
  name: string;
  amount: number;
  category_id: string;
}

const EXPENSE_FIELDS = ['name', 'amount', 'category_id', 'method_id', 'occurred_at', 'note'] as const;

type ExpenseArgs = {
  name: string;
  amount: number;
  category_id: string;
  method_id: string;
  occurred_at?: string;
  note?: string;
};

export const expenseTools: Tool[] = [
  tool<ExpenseArgs>()({
    name: 'create_expense',
    title: 'Record an expense',
    description: 'Records a personal expense and returns it with its id. For several at once use create_expenses.',
    annotations: CREATE,
    creates: true,
    required: ['name', 'amount', 'category_id', 'method_id'],
    input: (f) => f.expense,
    output: { expense, ...changeOutput },
    async run(args, { db }) {
      const row = await db.insert<Expense>('personal_transactions', given(args, EXPENSE_FIELDS), EXPENSE_COLUMNS);
      const undo = undoable(db);
      return {
        structured: { expense: row, ...undo.fields },
        summary: `Recorded expense "${row.name}" of ${money(row.amount)} (${row.category_id}) with id ${row.id}.${undo.text}`,
      };
    },
  }),
  tool<{ expenses: ExpenseArgs[] }>()({
    name: 'create_expenses',
    title: 'Record many expenses',
    description:
      'Records 1 to 100 expenses in one call, all or nothing: when one is invalid, none is written and the error names ' +
      "it. Each expense counts as one request against the token's rate limit.",
    annotations: CREATE,
    creates: true,
    required: ['expenses'],
    input: (f) => ({
      expenses: {
        type: 'array',
        minItems: 1,
        maxItems: 100,
        description: 'The expenses, each with the fields of create_expense',
        items: {
          type: 'object',
          properties: terse(f.expense),
          required: ['name', 'amount', 'category_id', 'method_id'],
          additionalProperties: false,
        },
      },
    }),
    output: {
      expenses: array(expense, 'The recorded expenses, in the order given'),
      count: { type: 'integer' },
      ...changesOutput,
    },
    async run(args, { db, caller }) {
      const items = args.expenses;
      await caller.charge?.(items.length - 1); // the call itself was counted already
      // One INSERT statement (Prefer: missing=default: a field one item leaves out takes its default).
      const rows = await db.insertMany<Expense>('personal_transactions', items, EXPENSE_COLUMNS);
      const sum = round(rows.reduce((s, e) => s + e.amount, 0));
      const undo = undoableAll(db);
      return {
        structured: { expenses: rows, count: rows.length, ...undo.fields },
        summary: `Recorded ${rows.length} expenses totalling ${money(sum)}.${undo.text}`,
      };
    },
  }),
  tool<Paging & DateRange & { category_id?: string; method_id?: string; search?: string }>()({
    name: 'list_expenses',
    title: 'List expenses',
    description: 'Lists expenses, newest first, filtered and in pages. For sums over a period use spending_summary.',
    annotations: READ,
    required: [],
    input: (f) => ({
      ...paging,
      category_id: {
        ...f.expense.category_id,
        description: 'Only this category',
      },
      method_id: {
        ...f.expense.method_id,
        description: 'Only this payment method',
      },
      ...dateFilters,
      search: { ...search, description: 'Text in the name or note (any case)' },
    }),
    output: { expenses: array(expense), ...pageOutput },
    async run(args, { db }) {
      const q = listQuery(args, EXPENSE_COLUMNS, { category_id: args.category_id, method_id: args.method_id });
      if (args.search) q.append('or', searchFilter(['name', 'note'], args.search));
      const page = await db.page<Expense>('personal_transactions', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      const sum = round(page.rows.reduce((s, e) => s + e.amount, 0));
      return {
        structured: { expenses: page.rows, ...pageFields(page) },
        summary: pageText(page, 'expenses') + (page.rows.length ? ` This page sums to ${money(sum)}.` : ''),
      };
    },
  }),
  tool<DateRange>()({
    name: 'spending_summary',
    title: 'Spending summary',
    description:
      'Sums the expenses between two dates (whole UTC days, both included; either may be left out) by category, payment method ' +
      'and month, largest first: "what did I spend on food last month?".',
    annotations: READ,
    required: [],
    input: () => ({
      start_date: {
        type: 'string',
        format: 'date',
        description: 'First day',
      },
      end_date: {
        type: 'string',
        format: 'date',
        description: 'Last day, included',
      },
    }),
    output: {
      from_date: { type: ['string', 'null'], format: 'date' },
      to_date: { type: ['string', 'null'], format: 'date' },
      total: { type: 'number', description: 'Sum of the matching expenses, in the workspace currency' },
      count: { type: 'integer' },
      by_category: array({
        type: 'object',
        properties: { category_id: { type: 'string' }, total: { type: 'number' }, count: { type: 'integer' } },
      }),
      by_method: array({
        type: 'object',
        properties: { method_id: { type: 'string' }, total: { type: 'number' }, count: { type: 'integer' } },
      }),
      by_month: array({
        type: 'object',
        properties: {
          month: { type: 'string', description: 'YYYY-MM (UTC)' },
          total: { type: 'number' },
          count: { type: 'integer' },
        },
      }),
    },
    async run(args, { db }) {
      if (args.start_date && args.end_date && args.end_date < args.start_date)
        throw new ToolError('end_date must not be before start_date.');
      const s = await db.rpc<{ total: number; count: number; by_category: { category_id: string; total: number }[] }>(
        'spending_summary',
        { from_date: args.start_date ?? null, to_date: args.end_date ?? null },
      );
      const top = s.by_category
        .slice(0, 3)
        .map((c) => `${c.category_id} ${money(c.total)}`)
        .join(', ');
      const period = `${args.start_date ?? 'the beginning'} to ${args.end_date ?? 'now'}`;
      return {
        structured: s,
        summary: `${s.count} expenses from ${period} total ${money(s.total)}${top ? ` (largest: ${top})` : ''}.`,
      };
    },
  }),
  tool<ById & Partial<Omit<ExpenseArgs, 'note'>> & { note?: string | null }>()({
    name: 'update_expense',
    title: 'Update an expense',
    description:
      'Changes the given fields of an expense (as create_expense describes them); others stay, note: null clears the note.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The expense id (list_expenses shows them)'),
      ...terse(f.expense),
      note: nullable(terse(f.expense).note),
    }),
    output: { expense, ...changeOutput },
    async run(args, { db }) {
      const row = await db.update<Expense>(
        'personal_transactions',
        args.id,
        given(args, EXPENSE_FIELDS),
        EXPENSE_COLUMNS,
      );
      if (!row) throw notFound('expense', args.id, 'list_expenses');
      const undo = undoable(db);
      return {
        structured: { expense: row, ...undo.fields },
        summary: `Updated expense "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),
  tool<ById>()({
    name: 'delete_expense',
    title: 'Delete an expense',
    description: 'Permanently deletes an expense and returns what was deleted.',
    annotations: DELETE,
    required: ['id'],
    input: () => ({ id: uuid('The expense id (list_expenses shows them)') }),
    output: { deleted: expense, ...changeOutput },
    async run(args, { db }) {
      const row = await db.remove<Expense>('personal_transactions', args.id, EXPENSE_COLUMNS);
      if (!row) throw notFound('expense', args.id, 'list_expenses');
      const undo = undoable(db);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted expense "${row.name}" of ${money(row.amount)} (${row.id}).${undo.text}`,
      };
    },
  }),
];
