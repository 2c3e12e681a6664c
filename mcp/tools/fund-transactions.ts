import { uuid } from '../../gateway/fields.js';
import type { TableClient } from '../gateway-client.js';
import { DEFAULT_LIMIT, FUND_TRANSACTION_COLUMNS, array, fundTransaction, pageOutput } from '../schemas.js';
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
  pick,
  type ById,
  type DateRange,
  type Paging,
} from './shared.js';
import { changeOutput, undoable } from './undoable.js';

// The ledger of group funds: income (positive amounts) and payouts (negative) against a fund.

export interface FundTransaction {
  id: string;
  fund_id: string;
  name: string;
  amount: number;
}

type FundTransactionArgs = {
  fund_id: string;
  name: string;
  amount: number;
  category_id: string;
  method_id: string;
  occurred_at?: string;
};

async function fundExists(db: TableClient, id: string): Promise<boolean> {
  return (await db.list('funds', new URLSearchParams({ select: 'id', id: `eq.${id}` }))).length > 0;
}

export const fundTransactionTools: Tool[] = [
  tool<FundTransactionArgs>()({
    name: 'create_fund_transaction',
    title: 'Record a fund transaction',
    description:
      'Records income (a contribution: positive amount) or an expense payout (negative amount) against a fund.',
    annotations: CREATE,
    creates: true,
    required: ['fund_id', 'name', 'amount', 'category_id', 'method_id'],
    input: (f) => f.fundTransaction,
    output: { transaction: fundTransaction, ...changeOutput },
    async run(args, { db }) {
      const row = await db.insert<FundTransaction>(
        'fund_transactions',
        given(args, ['fund_id', 'name', 'amount', 'category_id', 'method_id', 'occurred_at']),
        FUND_TRANSACTION_COLUMNS,
      );
      const undo = undoable(db);
      return {
        structured: { transaction: row, ...undo.fields },
        summary: `Recorded ${row.amount > 0 ? 'income' : 'expense'} "${row.name}" of ${money(Math.abs(row.amount))} on fund ${row.fund_id} (id ${row.id}).${undo.text}`,
      };
    },
  }),
  tool<Paging & DateRange & { fund_id?: string; category_id?: string }>()({
    name: 'list_fund_transactions',
    title: 'List fund transactions',
    description: 'Lists fund transactions, newest first, of one fund or of all, filtered and in pages.',
    annotations: READ,
    required: [],
    input: (f) => ({
      fund_id: uuid('Only transactions of this fund (list_funds shows the ids)'),
      ...paging,
      category_id: {
        ...f.fundTransaction.category_id,
        description: 'Only this category',
      },
      ...dateFilters,
    }),
    output: { transactions: array(fundTransaction), ...pageOutput },
    async run(args, { db }) {
      const q = listQuery(args, FUND_TRANSACTION_COLUMNS, { fund_id: args.fund_id, category_id: args.category_id });
      const page = await db.page<FundTransaction>(
        'fund_transactions',
        q,
        args.limit ?? DEFAULT_LIMIT,
        args.offset ?? 0,
      );
      // An empty page of an unknown fund would read as "no transactions yet": say what is wrong.
      if (page.rows.length === 0 && args.fund_id && !(await fundExists(db, args.fund_id)))
        throw notFound('fund', args.fund_id, 'list_funds');
      return {
        structured: { transactions: page.rows, ...pageFields(page) },
        summary: pageText(page, 'fund transactions'),
      };
    },
  }),
  tool<ById & Partial<Omit<FundTransactionArgs, 'fund_id'>>>()({
    name: 'update_fund_transaction',
    title: 'Update a fund transaction',
    description:
      'Changes the given fields of a fund transaction (as create_fund_transaction describes them; it stays in its fund); others stay.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The fund transaction id (list_fund_transactions shows them)'),
      ...terse(pick(f.fundTransaction, ['name', 'amount', 'category_id', 'method_id', 'occurred_at'])),
    }),
    output: { transaction: fundTransaction, ...changeOutput },
    async run(args, { db }) {
      const row = await db.update<FundTransaction>(
        'fund_transactions',
        args.id,
        given(args, ['name', 'amount', 'category_id', 'method_id', 'occurred_at']),
        FUND_TRANSACTION_COLUMNS,
      );
      if (!row) throw notFound('fund transaction', args.id, 'list_fund_transactions');
      const undo = undoable(db);
      return {
        structured: { transaction: row, ...undo.fields },
        summary: `Updated fund transaction "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),
  tool<ById>()({
    name: 'delete_fund_transaction',
    title: 'Delete a fund transaction',
    description: 'Permanently deletes a fund transaction and returns what was deleted.',
    annotations: DELETE,
    required: ['id'],
    input: () => ({ id: uuid('The fund transaction id (list_fund_transactions shows them)') }),
    output: { deleted: fundTransaction, ...changeOutput },
    async run(args, { db }) {
      const row = await db.remove<FundTransaction>('fund_transactions', args.id, FUND_TRANSACTION_COLUMNS);
      if (!row) throw notFound('fund transaction', args.id, 'list_fund_transactions');
      const undo = undoable(db);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted fund transaction "${row.name}" of ${money(row.amount)} (${row.id}).${undo.text}`,
      };
    },
  }),
];
