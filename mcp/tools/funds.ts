import { uuid, type JsonSchema } from '../../gateway/fields.js';
import {
  CONTACT_COLUMNS,
  DEFAULT_LIMIT,
  FUND_COLUMNS,
  FUND_TRANSACTION_COLUMNS,
  array,
  fund,
  fundTransaction,
  fundWithTotals,
  limit,
  offset,
  participant,
} from '../schemas.js';
import { pageOf, ToolError } from '../gateway-client.js';
import { CREATE, DELETE, READ, UPDATE, tool, type Tool } from './tool.js';
import { nullables, terse, given, money, notFound, pageText, pick, type NoArgs } from './shared.js';
import { changeOutput, undoable } from './undoable.js';
import type { FundTransaction } from './fund-transactions.js';
import type { Contact } from './contacts.js';

// Group funds: list them with their totals, read one with its participants and ledger, create,
// change, and add a participant. Their transactions are in fund-transactions.ts.

/** public.fund_figures, as the computed field funds.summary embeds it (sql/app/definitions/funds.sql). */
interface FundFigures {
  balance: number;
  income: number;
  expenses: number;
  progress: number | null;
  participant_count: number;
}

interface FundRow {
  id: string;
  name: string;
  kind: string;
  status: string;
  currency: string;
  target_amount: number | null;
  summary: FundFigures;
}

/** The figures of a fund that has no transaction and no participant (progress: none without a target). */
const noFigures = (target: number | null): FundFigures => ({
  balance: 0,
  income: 0,
  expenses: 0,
  progress: target !== null && Number(target) > 0 ? 0 : null,
  participant_count: 0,
});

/** The fund's totals as Postgres computes them (fund_summary); only picked out here, never recomputed. */
function withTotals<T extends FundRow>(row: T) {
  const { summary: s, ...rest } = row;
  return {
    ...rest,
    totals: {
      balance: Number(s.balance),
      income: Number(s.income),
      expenses: Number(s.expenses),
      progress: s.progress === null ? null : Number(s.progress),
    },
  };
}

/** What create_fund and update_fund set (create_fund also kind and currency, update_fund status). */
const FUND_FIELDS = [
  'name',
  'target_amount',
  'description',
  'start_date',
  'end_date',
  'contribution_amount',
  'contribution_frequency',
  'contribution_due_day',
] as const;

type FundArgs = {
  name: string;
  kind?: string;
  currency?: string;
  target_amount?: number;
  description?: string;
  start_date?: string;
  end_date?: string;
  contribution_amount?: number;
  contribution_frequency?: string;
  contribution_due_day?: number;
};

/** update_fund's arguments: null clears an optional field. */
type UpdateFundArgs = { fund_id: string; name?: string; status?: string } & {
  [K in keyof Omit<FundArgs, 'name' | 'kind' | 'currency'>]?: FundArgs[K] | null;
};

const participantOutput: JsonSchema = {
  type: 'object',
  properties: {
    fund_id: { type: 'string', format: 'uuid' },
    contact_id: { type: 'string', format: 'uuid' },
    joined_at: { type: 'string', format: 'date-time' },
  },
  required: ['fund_id', 'contact_id', 'joined_at'],
};

export const fundTools: Tool[] = [
  tool<NoArgs>()({
    name: 'list_funds',
    title: 'List funds',
    description:
      'Lists every fund of the workspace with its target, and real-time totals computed from its transactions: balance, ' +
      'income, expenses and progress toward the target.',
    annotations: READ,
    required: [],
    input: () => ({}),
    output: { funds: array(fundWithTotals) },
    async run(_args, { db }) {
      // The figures of every fund in one statement (rpc/fund_summaries), then the funds: the
      // computed field summary would be a statement per fund (on Citus, each planned by Citus on
      // the worker: seconds for a few thousand funds). A fund made between the two reads has no
      // transactions yet: its figures are zero.
      const figures = await db.list<FundFigures & { fund_id: string }>('rpc/fund_summaries', new URLSearchParams());
      const byFund = new Map(figures.map(({ fund_id, ...f }) => [fund_id, f]));
      const rows = await db.list<Omit<FundRow, 'summary'>>(
        'funds',
        new URLSearchParams({ select: FUND_COLUMNS, order: 'created_at.desc,id.asc' }),
      );
      const funds = rows.map((row) =>
        withTotals({ ...row, summary: byFund.get(row.id) ?? noFigures(row.target_amount) }),
      );
      const lines = funds.map(
        (f) =>
          `- ${f.name} (${f.status}): balance ${money(f.totals.balance)} ${f.currency}` +
          (f.target_amount ? ` of target ${money(f.target_amount)}` : ''),
      );
      return {
        structured: { funds },
        summary: funds.length ? `${funds.length} funds:\n${lines.join('\n')}` : 'The workspace has no funds yet.',
      };
    },
  }),
  tool<{ fund_id: string; ledger_limit?: number; ledger_offset?: number }>()({
    name: 'get_fund',
    title: 'Get a fund',
    description:
      'One fund: its fields, totals and participants, and one page of its ledger, newest first (ledger_limit, ledger_offset).',
    annotations: READ,
    required: ['fund_id'],
    input: () => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      ledger_limit: { ...limit, description: 'How many ledger entries to return, 1 to 1000 (default 50)' },
      ledger_offset: {
        ...offset,
        description: 'How many ledger entries to skip: the ledger_next_offset of the previous call (default 0)',
      },
    }),
    output: {
      fund: fundWithTotals,
      participants: array(participant),
      ledger: array(fundTransaction, "One page of the fund's transactions, newest first"),
      ledger_has_more: { type: 'boolean' },
      ledger_next_offset: {
        type: ['integer', 'null'],
        description: 'The ledger_offset of the next page; null on the last page',
      },
    },
    async run(args, { db }) {
      const ledgerLimit = args.ledger_limit ?? DEFAULT_LIMIT;
      const ledgerOffset = args.ledger_offset ?? 0;
      const q = new URLSearchParams({
        select: `${FUND_COLUMNS},summary,fund_transactions(${FUND_TRANSACTION_COLUMNS}),fund_participants(joined_at,contacts(${CONTACT_COLUMNS}))`,
        id: `eq.${args.fund_id}`,
        'fund_transactions.order': 'occurred_at.desc,id.desc',
        'fund_transactions.limit': String(ledgerLimit + 1),
        'fund_transactions.offset': String(ledgerOffset),
      });
      type Row = FundRow & {
        fund_transactions: FundTransaction[];
        fund_participants: { joined_at: string; contacts: Contact }[];
      };
      const [row] = await db.list<Row>('funds', q);
      if (!row) throw notFound('fund', args.fund_id, 'list_funds');
      const participants = row.fund_participants.map((p) => ({ ...p.contacts, joined_at: p.joined_at }));
      const ledger = pageOf(row.fund_transactions, ledgerLimit, ledgerOffset);
      const { fund_transactions: _ledger, fund_participants: _joins, ...fields } = row;
      const f = withTotals(fields);
      const t = f.totals;
      return {
        structured: {
          fund: f,
          participants,
          ledger: ledger.rows,
          ledger_has_more: ledger.has_more,
          ledger_next_offset: ledger.next_offset,
        },
        summary:
          `${row.name} (${row.kind}, ${row.status}): balance ${money(t.balance)} ${row.currency}, income ${money(t.income)}, ` +
          `expenses ${money(t.expenses)}${row.target_amount ? `, ${Math.round((t.progress ?? 0) * 100)}% of target ${money(row.target_amount)}` : ''}; ` +
          `${participants.length} participants; ${pageText(ledger, 'ledger entries').replace('next_offset', 'ledger_next_offset')}`,
      };
    },
  }),
  tool<FundArgs>()({
    name: 'create_fund',
    title: 'Create a fund',
    description:
      'Creates a collective fund (a trip, a sports season, an event budget). Its status starts as Upcoming; the currency defaults to the workspace currency. ' +
      'A contribution schedule is contribution_amount, contribution_frequency and contribution_due_day, given together.',
    annotations: CREATE,
    creates: true,
    required: ['name'],
    input: (f) => pick(f.fund, [...FUND_FIELDS, 'kind', 'currency']),
    output: { fund, ...changeOutput },
    async run(args, { db }) {
      const row = await db.insert<FundRow>('funds', given(args, [...FUND_FIELDS, 'kind', 'currency']), FUND_COLUMNS);
      const undo = undoable(db);
      return {
        structured: { fund: row, ...undo.fields },
        summary: `Created fund "${row.name}" (${row.kind}, ${row.currency}) with id ${row.id}.${undo.text}`,
      };
    },
  }),
  tool<UpdateFundArgs>()({
    name: 'update_fund',
    title: 'Update a fund',
    description:
      'Changes the given fields of a fund (as create_fund describes them); null clears an optional one, the contribution schedule ' +
      'is set or cleared whole, and any status may follow any.',
    annotations: UPDATE,
    required: ['fund_id'],
    input: (f) => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      ...pick(f.fund, ['name', 'status']),
      ...nullables(
        terse(
          pick(
            f.fund,
            [...FUND_FIELDS].filter((n) => n !== 'name'),
          ),
        ),
      ),
    }),
    output: { fund, ...changeOutput },
    async run(args, { db }) {
      const row = await db.update<FundRow>(
        'funds',
        args.fund_id,
        given(args, [...FUND_FIELDS, 'status']),
        FUND_COLUMNS,
      );
      if (!row) throw notFound('fund', args.fund_id, 'list_funds');
      const undo = undoable(db);
      return {
        structured: { fund: row, ...undo.fields },
        summary: `Updated fund "${row.name}" (${row.status}).${undo.text}`,
      };
    },
  }),
  tool<{ fund_id: string; contact_id: string }>()({
    name: 'add_fund_participant',
    title: 'Add a participant to a fund',
    description:
      'Makes a contact of the roster a participant of a fund. Both must be of this workspace; a contact takes part once.',
    // A contact takes part once: a repeat is refused, never a second participant.
    annotations: { ...CREATE, idempotentHint: true },
    creates: true,
    required: ['fund_id', 'contact_id'],
    input: () => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      contact_id: uuid('The contact id (list_contacts shows them)'),
    }),
    output: { participant: participantOutput, ...changeOutput },
    async run(args, { db }) {
      const row = await db.insert<{ fund_id: string; contact_id: string }>(
        'fund_participants',
        { fund_id: args.fund_id, contact_id: args.contact_id },
        'fund_id,contact_id,joined_at',
      );
      const undo = undoable(db);
      return {
        structured: { participant: row, ...undo.fields },
        summary: `Contact ${row.contact_id} now takes part in fund ${row.fund_id}.${undo.text}`,
      };
    },
  }),
  tool<{ fund_id: string; contact_id: string }>()({
    name: 'remove_fund_participant',
    title: 'Remove a participant from a fund',
    description:
      'Ends a contact taking part in a fund (the contact stays in the roster, the fund keeps its transactions). Not a participant is an error.',
    annotations: DELETE,
    required: ['fund_id', 'contact_id'],
    input: () => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      contact_id: uuid("The contact id (get_fund lists the fund's participants)"),
    }),
    output: { removed: participantOutput, ...changeOutput },
    async run(args, { db }) {
      const [row] = await db.removeWhere<{ fund_id: string; contact_id: string }>(
        'fund_participants',
        { fund_id: args.fund_id, contact_id: args.contact_id },
        'fund_id,contact_id,joined_at',
      );
      if (!row)
        throw new ToolError(
          `Contact ${args.contact_id} takes no part in a fund ${args.fund_id} of this workspace (get_fund lists its participants).`,
        );
      const undo = undoable(db);
      return {
        structured: { removed: row, ...undo.fields },
        summary: `Contact ${row.contact_id} no longer takes part in fund ${row.fund_id}.${undo.text}`,
      };
    },
  }),
  tool<{ fund_id: string }>()({
    name: 'delete_fund',
    title: 'Delete a fund',
    description:
      'Permanently deletes a fund with its transactions and participants (the contacts stay in the roster) and returns the fund. An unknown id is an error.',
    annotations: DELETE,
    required: ['fund_id'],
    input: () => ({ fund_id: uuid('The fund id (list_funds shows them)') }),
    output: { deleted: fund, ...changeOutput },
    async run(args, { db }) {
      const row = await db.remove<FundRow>('funds', args.fund_id, FUND_COLUMNS);
      if (!row) throw notFound('fund', args.fund_id, 'list_funds');
      const undo = undoable(db);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted fund "${row.name}" with its transactions and participants (${row.id}).${undo.text}`,
      };
    },
  }),
];
