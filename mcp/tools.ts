import type { AuthContext } from '../gateway/engine/call.js';
import type { Scope } from '../gateway/auth/workspace-token.js';
import { type financeFields, nullable, uuid, type JsonSchema } from '../gateway/fields.js';
import type { Lookups } from '../gateway/lookups.js';
import { type TableClient, ToolError, pageOf, searchFilter, type Page } from './gateway-client.js';
import {
  CONTACT_COLUMNS,
  DEFAULT_LIMIT,
  EXPENSE_COLUMNS,
  FUND_COLUMNS,
  FUND_TRANSACTION_COLUMNS,
  array,
  contact,
  dateOrDateTime,
  expense,
  fund,
  fundTransaction,
  fundWithTotals,
  limit,
  offset,
  pageOutput,
  participant,
  rangeEnd,
  rangeStart,
  search,
  ACTIVITY_COLUMNS,
  TRACKED_TABLES,
  change,
} from './schemas.js';
import { defined } from '../gateway/engine/invariant.js';

// The tools: the 14 core ones, then get_workspace, create_expenses, spending_summary,
// update_fund_transaction, add_fund_participant, list_activity and undo_change, which go beyond it. Each is a thin
// translation into one or a few gateway calls under the caller's role and workspace claim:
// RLS, scopes, revocation and the API switch hold as on the REST surfaces. Input schemas are
// built from the field rules of gateway/fields.ts, the wrapper's.

interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

interface RateLimitLeft {
  limit: number;
  remaining: number;
  reset_at: string;
}

/** Who calls, as a tool sees it. */
export interface McpCaller {
  auth: AuthContext;
  scope: Scope;
  /** Counts this many requests more against the token's rate limit; absent where nothing is limited (stdio). */
  charge?(hits: number): Promise<void>;
  /** What is left of the token's rate limit; absent where nothing is limited (stdio). */
  rateLimit?(): Promise<RateLimitLeft>;
}

export interface ToolContext {
  db: TableClient;
  caller: McpCaller;
  lookups: Lookups;
}

interface ToolResult {
  structured: Record<string, unknown>;
  /** One line for a person; the records follow it as JSON in the same text block. */
  summary: string;
}

type Fields = ReturnType<typeof financeFields>;

/** A tool as the server lists and calls it: arguments validated against its input schema first. */
export interface Tool {
  name: string;
  title: string;
  description: string;
  annotations: ToolAnnotations;
  /**
   * The tool creates records: it takes an `idempotency_key` argument besides its own (the server
   * adds it to the schema and sends it as the Idempotency-Key of the tool's POSTs), which makes
   * a repeated call answer the first call's records and write nothing.
   */
  creates?: true;
  /** The arguments a call must give. */
  required: readonly string[];
  /** The arguments' schemas; the object is closed (an unknown argument is an error). */
  input(fields: Fields, lookups: Lookups): Record<string, JsonSchema>;
  output: Record<string, JsonSchema>;
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult>;
}

/** A tool whose arguments are `A`: its schema names exactly A's keys, and `required` exactly its required ones. */
interface ToolSpec<A, R extends readonly string[], P> extends Omit<Tool, 'required' | 'input' | 'run'> {
  required: R;
  input(fields: Fields, lookups: Lookups): P;
  run(args: A, ctx: ToolContext): Promise<ToolResult>;
}

type RequiredKeys<A> = { [K in keyof A]-?: undefined extends A[K] ? never : K }[keyof A] & string;
type Missing<A, R extends readonly string[]> = Exclude<RequiredKeys<A>, R[number]>;
type Optional<A, R extends readonly string[]> = Exclude<R[number], RequiredKeys<A>>;
type Unknown<A, P> = Exclude<keyof P, keyof A>;
/** `unknown` when the spec agrees with A, else a property whose name says what is wrong (a compile error). */
type Agrees<A, R extends readonly string[], P> = ([Missing<A, R>] extends [never]
  ? unknown
  : { required_misses: Missing<A, R> }) &
  ([Optional<A, R>] extends [never] ? unknown : { required_names_an_optional_argument: Optional<A, R> }) &
  ([Unknown<A, P>] extends [never] ? unknown : { input_names_an_unknown_argument: Unknown<A, P> });

/**
 * A tool with typed arguments: `tool<Args>()({...})`. The compiler holds its schema to `Args`
 * (every argument has a schema, none more; `required` lists exactly the arguments that are not
 * optional), and `run` gets `Args`: the server validated the call against that schema before.
 */
const tool =
  <A>() =>
  <const R extends readonly (keyof A & string)[], P extends { [K in keyof A]-?: JsonSchema }>(
    spec: ToolSpec<A, R, P> & Agrees<A, R, P>,
  ): Tool =>
    spec as unknown as Tool;

/** Read tools are what a read-only token sees. */
export const isReadTool = (tool: Tool): boolean => tool.annotations.readOnlyHint === true;

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
// Idempotent with its idempotency_key (Tool.creates): a call repeated with the same arguments,
// key included, has no further effect.
const CREATE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const UPDATE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const DELETE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: true,
  openWorldHint: false,
};

// One formatter for every summary: toLocaleString with options builds a new one per call, which
// was a tenth of a list call's CPU.
const MONEY = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 });
const money = (n: number): string => MONEY.format(n);
const round = (n: number): number => Math.round(n * 10_000) / 10_000;

/** Only the fields the caller gave: update_* changes nothing else. */
function given<A extends object>(args: A, fields: readonly (keyof A & string)[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (args[f] !== undefined) out[f] = args[f];
  if (Object.keys(out).length === 0) throw new ToolError(`Give at least one field to change: ${fields.join(', ')}.`);
  return out;
}

/** Some of a table's fields. */
function pick<T extends Record<string, JsonSchema>, K extends keyof T & string>(fields: T, names: K[]): Pick<T, K> {
  return Object.fromEntries(names.map((n) => [n, defined(fields[n], `the field ${n}`)])) as Pick<T, K>;
}

/** Date range and enum filters shared by the list tools (paging is TableClient.page). */
function listQuery(args: DateRange, columns: string, filters: Record<string, string | undefined>): URLSearchParams {
  const q = new URLSearchParams({ select: columns, order: 'occurred_at.desc,id.desc' });
  for (const [column, value] of Object.entries(filters)) if (value !== undefined) q.append(column, `eq.${value}`);
  if (args.start_date !== undefined) q.append('occurred_at', `gte.${rangeStart(args.start_date)}`);
  if (args.end_date !== undefined) {
    const [op, value] = rangeEnd(args.end_date);
    q.append('occurred_at', `${op}.${value}`);
  }
  return q;
}

const paging = { limit, offset };
const dateFilters = {
  start_date: dateOrDateTime('Only records on or after this moment (a date means from 00:00 UTC of that day)'),
  end_date: dateOrDateTime('Only records on or before this moment (a date includes that whole UTC day)'),
};

/** "Records 51-100 of 230" / "51-100, more follow (next_offset 100)". */
function pageText(page: Page<unknown>, noun: string): string {
  if (page.rows.length === 0)
    return page.offset > 0 ? `No ${noun} at offset ${page.offset} (the last page was before it).` : `No ${noun} match.`;
  const range = `${noun} ${page.offset + 1}-${page.offset + page.rows.length}`;
  return page.has_more ? `${range}; more follow (next_offset ${page.next_offset}).` : `${range} of ${page.total}.`;
}

const pageFields = (page: Page<unknown>) => ({
  limit: page.limit,
  offset: page.offset,
  has_more: page.has_more,
  next_offset: page.next_offset,
  total: page.total,
});

/** public.fund_figures, as the computed field funds.summary embeds it (sql/051_fund_figures_linear.sql). */
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

/** The schema of the activity id an update_* or delete_* result names. */
const changeId = uuid('The change this call made: undo_change with this id puts the record back');

/**
 * The change a write just made, from the activity log, for its result: `activity_id`, and a
 * sentence saying how to undo it. The write and this read are two calls; the record's latest
 * change is the write's unless the record changed again in between.
 */
async function undoable(
  db: TableClient,
  table: string,
  id: string,
): Promise<{ fields: { activity_id?: string }; text: string }> {
  const [last] = await db.list<{ id: string }>(
    'activity',
    new URLSearchParams({
      select: 'id',
      table_name: `eq.${table}`,
      record_id: `eq.${id}`,
      order: 'at.desc',
      limit: '1',
    }),
  );
  if (!last) return { fields: {}, text: '' };
  return { fields: { activity_id: last.id }, text: ` To undo it: undo_change with activity_id ${last.id}.` };
}

const notFound = (noun: string, id: string, lister: string) =>
  new ToolError(`No ${noun} with id ${id} in this workspace (${lister} shows the ids).`);

interface Expense {
  id: string;
  name: string;
  amount: number;
  category_id: string;
}
interface FundTransaction {
  id: string;
  fund_id: string;
  name: string;
  amount: number;
}
interface Contact {
  id: string;
  name: string;
}
/** A row of public.activity, as list_activity and undo_change answer it. */
interface Change {
  id: string;
  table_name: string;
  record_id: string;
  action: string;
}

async function fundExists(db: TableClient, id: string): Promise<boolean> {
  return (await db.list('funds', new URLSearchParams({ select: 'id', id: `eq.${id}` }))).length > 0;
}

const EXPENSE_FIELDS = ['name', 'amount', 'category_id', 'method_id', 'occurred_at', 'note'] as const;

// The tools' arguments. Each tool's schema is held to its type by tool<…>() above.
type Paging = { limit?: number; offset?: number };
type DateRange = { start_date?: string; end_date?: string };
type ById = { id: string };
type ExpenseArgs = {
  name: string;
  amount: number;
  category_id: string;
  method_id: string;
  occurred_at?: string;
  note?: string;
};
type FundTransactionArgs = {
  fund_id: string;
  name: string;
  amount: number;
  category_id: string;
  method_id: string;
  occurred_at?: string;
};
type ContactArgs = {
  name: string;
  nickname?: string;
  phone?: string;
  email?: string;
  gender?: string;
  nationality?: string;
};
type NoArgs = Record<never, never>;

export const tools: Tool[] = [
  tool<ExpenseArgs>()({
    name: 'create_expense',
    title: 'Record an expense',
    description:
      'Records a personal expense in the workspace and returns it with its id. For several expenses at once use create_expenses.',
    annotations: CREATE,
    creates: true,
    required: ['name', 'amount', 'category_id', 'method_id'],
    input: (f) => f.expense,
    output: { expense },
    async run(args, { db }) {
      const row = await db.insert<Expense>('personal_transactions', given(args, EXPENSE_FIELDS), EXPENSE_COLUMNS);
      return {
        structured: { expense: row },
        summary: `Recorded expense "${row.name}" of ${money(row.amount)} (${row.category_id}) with id ${row.id}.`,
      };
    },
  }),
  tool<Paging & DateRange & { category_id?: string; method_id?: string; search?: string }>()({
    name: 'list_expenses',
    title: 'List expenses',
    description:
      'Lists expenses, newest first (by occurred_at). Filters: category_id, method_id, start_date/end_date (ISO date = whole UTC ' +
      'day, inclusive; or a date-time), search (case-insensitive substring of name or note). Pages: limit (1-1000, default 50) and ' +
      'offset; has_more and next_offset say whether and where the next page starts, and total is exact on the last page only ' +
      '(null while more follow: the whole table is never counted). For sums over a period use spending_summary.',
    annotations: READ,
    required: [],
    input: (f) => ({
      ...paging,
      category_id: {
        ...f.expense.category_id,
        description: `Only this category. ${f.expense.category_id.description as string}`,
      },
      method_id: {
        ...f.expense.method_id,
        description: `Only this payment method. ${f.expense.method_id.description as string}`,
      },
      ...dateFilters,
      search: { ...search, description: 'Case-insensitive text to find in the name or note' },
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
  tool<ById & Partial<Omit<ExpenseArgs, 'note'>> & { note?: string | null }>()({
    name: 'update_expense',
    title: 'Update an expense',
    description:
      'Changes the given fields of an expense; fields left out stay as they are, note: null clears the note. An unknown id is an error.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The expense id (list_expenses shows them)'),
      ...f.expense,
      note: nullable(f.expense.note),
    }),
    output: { expense, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.update<Expense>(
        'personal_transactions',
        args.id,
        given(args, EXPENSE_FIELDS),
        EXPENSE_COLUMNS,
      );
      if (!row) throw notFound('expense', args.id, 'list_expenses');
      const undo = await undoable(db, 'personal_transactions', row.id);
      return {
        structured: { expense: row, ...undo.fields },
        summary: `Updated expense "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),
  tool<ById>()({
    name: 'delete_expense',
    title: 'Delete an expense',
    description: 'Permanently deletes an expense and returns what was deleted. An unknown id is an error.',
    annotations: DELETE,
    required: ['id'],
    input: () => ({ id: uuid('The expense id (list_expenses shows them)') }),
    output: { deleted: expense, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.remove<Expense>('personal_transactions', args.id, EXPENSE_COLUMNS);
      if (!row) throw notFound('expense', args.id, 'list_expenses');
      const undo = await undoable(db, 'personal_transactions', row.id);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted expense "${row.name}" of ${money(row.amount)} (${row.id}).${undo.text}`,
      };
    },
  }),
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
      // One gateway call: the computed field summary is fund_summary() for each fund.
      const rows = await db.list<FundRow>(
        'funds',
        new URLSearchParams({ select: `${FUND_COLUMNS},summary`, order: 'created_at.desc,id.asc' }),
      );
      const funds = rows.map(withTotals);
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
      'One fund: its fields and budget target, its totals, its participants and one page of its ledger (newest first): ' +
      'ledger_limit (1-1000, default 50) and ledger_offset, with ledger_has_more and ledger_next_offset.',
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
  tool<{ name: string; kind?: string; currency?: string; target_amount?: number; description?: string }>()({
    name: 'create_fund',
    title: 'Create a fund',
    description:
      'Creates a collective fund (a trip, a sports season, an event budget). Its status starts as Upcoming; the currency defaults to the workspace currency.',
    annotations: CREATE,
    creates: true,
    required: ['name'],
    input: (f) => pick(f.fund, ['name', 'kind', 'currency', 'target_amount', 'description']),
    output: { fund },
    async run(args, { db }) {
      const row = await db.insert<FundRow>(
        'funds',
        given(args, ['name', 'kind', 'currency', 'target_amount', 'description']),
        FUND_COLUMNS,
      );
      return {
        structured: { fund: row },
        summary: `Created fund "${row.name}" (${row.kind}, ${row.currency}) with id ${row.id}.`,
      };
    },
  }),
  tool<{
    fund_id: string;
    name?: string;
    status?: string;
    target_amount?: number | null;
    description?: string | null;
  }>()({
    name: 'update_fund',
    title: 'Update a fund',
    description:
      "Changes the given fields of a fund. status may be set to any of 'Upcoming', 'In Progress', 'Completed' (no transition rule).",
    annotations: UPDATE,
    required: ['fund_id'],
    input: (f) => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      name: f.fund.name,
      status: f.fund.status,
      target_amount: nullable(f.fund.target_amount),
      description: nullable(f.fund.description),
    }),
    output: { fund, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.update<FundRow>(
        'funds',
        args.fund_id,
        given(args, ['name', 'status', 'target_amount', 'description']),
        FUND_COLUMNS,
      );
      if (!row) throw notFound('fund', args.fund_id, 'list_funds');
      const undo = await undoable(db, 'funds', row.id);
      return {
        structured: { fund: row, ...undo.fields },
        summary: `Updated fund "${row.name}" (${row.status}).${undo.text}`,
      };
    },
  }),
  tool<FundTransactionArgs>()({
    name: 'create_fund_transaction',
    title: 'Record a fund transaction',
    description:
      'Records income (a contribution: positive amount) or an expense payout (negative amount) against a fund.',
    annotations: CREATE,
    creates: true,
    required: ['fund_id', 'name', 'amount', 'category_id', 'method_id'],
    input: (f) => f.fundTransaction,
    output: { transaction: fundTransaction },
    async run(args, { db }) {
      const row = await db.insert<FundTransaction>(
        'fund_transactions',
        given(args, ['fund_id', 'name', 'amount', 'category_id', 'method_id', 'occurred_at']),
        FUND_TRANSACTION_COLUMNS,
      );
      return {
        structured: { transaction: row },
        summary: `Recorded ${row.amount > 0 ? 'income' : 'expense'} "${row.name}" of ${money(Math.abs(row.amount))} on fund ${row.fund_id} (id ${row.id}).`,
      };
    },
  }),
  tool<Paging & DateRange & { fund_id?: string; category_id?: string }>()({
    name: 'list_fund_transactions',
    title: 'List fund transactions',
    description:
      'Lists fund transactions, newest first: of one fund (fund_id; an unknown fund is an error) or of all funds. Filters: ' +
      'category_id, start_date/end_date (ISO date = whole UTC day, inclusive; or a date-time). Pages: limit (1-1000, default 50) ' +
      'and offset, with has_more and next_offset; total is exact on the last page only.',
    annotations: READ,
    required: [],
    input: (f) => ({
      fund_id: uuid('Only transactions of this fund (list_funds shows the ids)'),
      ...paging,
      category_id: {
        ...f.fundTransaction.category_id,
        description: `Only this category. ${f.fundTransaction.category_id.description as string}`,
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
  tool<ById>()({
    name: 'delete_fund_transaction',
    title: 'Delete a fund transaction',
    description: 'Permanently deletes a fund transaction and returns what was deleted. An unknown id is an error.',
    annotations: DELETE,
    required: ['id'],
    input: () => ({ id: uuid('The fund transaction id (list_fund_transactions shows them)') }),
    output: { deleted: fundTransaction, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.remove<FundTransaction>('fund_transactions', args.id, FUND_TRANSACTION_COLUMNS);
      if (!row) throw notFound('fund transaction', args.id, 'list_fund_transactions');
      const undo = await undoable(db, 'fund_transactions', row.id);
      return {
        structured: { deleted: row, ...undo.fields },
        summary: `Deleted fund transaction "${row.name}" of ${money(row.amount)} (${row.id}).${undo.text}`,
      };
    },
  }),
  tool<Paging & { search?: string }>()({
    name: 'list_contacts',
    title: 'List contacts',
    description:
      'Lists the roster of members and participants by name; search is a case-insensitive substring of name, nickname or phone. ' +
      'Pages: limit (1-1000, default 50) and offset, with has_more and next_offset.',
    annotations: READ,
    required: [],
    input: () => ({ search: { ...search, description: 'Text to find in the name, nickname or phone' }, ...paging }),
    output: { contacts: array(contact), ...pageOutput },
    async run(args, { db }) {
      const q = new URLSearchParams({ select: CONTACT_COLUMNS, order: 'name.asc,id.asc' });
      if (args.search) q.append('or', searchFilter(['name', 'nickname', 'phone'], args.search));
      const page = await db.page<Contact>('contacts', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      const names = page.rows.length ? `: ${page.rows.map((c) => c.name).join(', ')}` : '';
      return { structured: { contacts: page.rows, ...pageFields(page) }, summary: pageText(page, 'contacts') + names };
    },
  }),
  tool<ContactArgs>()({
    name: 'create_contact',
    title: 'Add a contact',
    description: 'Adds a member or participant to the workspace roster.',
    annotations: CREATE,
    creates: true,
    required: ['name'],
    input: (f) => f.contact,
    output: { contact },
    async run(args, { db }) {
      const row = await db.insert<Contact>(
        'contacts',
        given(args, ['name', 'nickname', 'phone', 'email', 'gender', 'nationality']),
        CONTACT_COLUMNS,
      );
      return { structured: { contact: row }, summary: `Added contact "${row.name}" with id ${row.id}.` };
    },
  }),
  tool<ById & { name?: string; nickname?: string | null; phone?: string | null; email?: string | null }>()({
    name: 'update_contact',
    title: 'Update a contact',
    description:
      'Changes the given fields of a contact; fields left out stay as they are, null clears an optional one. An unknown id is an error.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The contact id (list_contacts shows them)'),
      name: f.contact.name,
      nickname: nullable(f.contact.nickname),
      phone: nullable(f.contact.phone),
      email: nullable(f.contact.email),
    }),
    output: { contact, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.update<Contact>(
        'contacts',
        args.id,
        given(args, ['name', 'nickname', 'phone', 'email']),
        CONTACT_COLUMNS,
      );
      if (!row) throw notFound('contact', args.id, 'list_contacts');
      const undo = await undoable(db, 'contacts', row.id);
      return {
        structured: { contact: row, ...undo.fields },
        summary: `Updated contact "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),

  // ---- Beyond the core tools ---------------------------------------------------------------

  tool<NoArgs>()({
    name: 'get_workspace',
    title: 'About this workspace',
    description:
      "The workspace this token belongs to: its name and currency, the token's scope (read or write), how much of the rate limit " +
      'is left, and the live lists of expense categories, fund categories, payment methods and fund kinds. Also the resource tally://workspace.',
    annotations: READ,
    required: [],
    input: () => ({}),
    output: workspaceOutput(),
    async run(_args, ctx) {
      const structured = await workspaceInfo(ctx);
      const rate = structured.rate_limit as RateLimitLeft | null;
      return {
        structured,
        summary:
          `Workspace "${structured.name as string}" (${structured.currency as string}), ${ctx.caller.scope} token` +
          (rate ? `, ${rate.remaining} of ${rate.limit} requests left this minute.` : ', no rate limit (stdio).'),
      };
    },
  }),
  tool<{ expenses: ExpenseArgs[] }>()({
    name: 'create_expenses',
    title: 'Record many expenses',
    description:
      'Records 1 to 100 expenses in one call, all or nothing: when one is invalid, none is written and the error names it ' +
      "(expenses.3.amount …). Each expense counts as one request against the token's rate limit.",
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
          properties: f.expense,
          required: ['name', 'amount', 'category_id', 'method_id'],
          additionalProperties: false,
        },
      },
    }),
    output: { expenses: array(expense, 'The recorded expenses, in the order given'), count: { type: 'integer' } },
    async run(args, { db, caller }) {
      const items = args.expenses;
      await caller.charge?.(items.length - 1); // the call itself was counted already
      // One INSERT statement (Prefer: missing=default: a field one item leaves out takes its default).
      const rows = await db.insertMany<Expense>('personal_transactions', items, EXPENSE_COLUMNS);
      const sum = round(rows.reduce((s, e) => s + e.amount, 0));
      return {
        structured: { expenses: rows, count: rows.length },
        summary: `Recorded ${rows.length} expenses totalling ${money(sum)}.`,
      };
    },
  }),
  tool<DateRange>()({
    name: 'spending_summary',
    title: 'Spending summary',
    description:
      'Sums the personal expenses between two dates (whole UTC days, both included; leave one out for no bound) by category, by ' +
      'payment method and by month, largest first, computed by Postgres over every matching expense. Answers "what did I spend on food last month?".',
    annotations: READ,
    required: [],
    input: () => ({
      start_date: {
        type: 'string',
        format: 'date',
        description: 'First day, e.g. 2026-03-01 (default: no lower bound)',
      },
      end_date: {
        type: 'string',
        format: 'date',
        description: 'Last day, included, e.g. 2026-03-31 (default: no upper bound)',
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
  tool<ById & Partial<Omit<FundTransactionArgs, 'fund_id'>>>()({
    name: 'update_fund_transaction',
    title: 'Update a fund transaction',
    description:
      'Changes the given fields of a fund transaction (it stays in its fund); fields left out stay as they are. An unknown id is an error.',
    annotations: UPDATE,
    required: ['id'],
    input: (f) => ({
      id: uuid('The fund transaction id (list_fund_transactions shows them)'),
      ...pick(f.fundTransaction, ['name', 'amount', 'category_id', 'method_id', 'occurred_at']),
    }),
    output: { transaction: fundTransaction, activity_id: changeId },
    async run(args, { db }) {
      const row = await db.update<FundTransaction>(
        'fund_transactions',
        args.id,
        given(args, ['name', 'amount', 'category_id', 'method_id', 'occurred_at']),
        FUND_TRANSACTION_COLUMNS,
      );
      if (!row) throw notFound('fund transaction', args.id, 'list_fund_transactions');
      const undo = await undoable(db, 'fund_transactions', row.id);
      return {
        structured: { transaction: row, ...undo.fields },
        summary: `Updated fund transaction "${row.name}" (${row.id}).${undo.text}`,
      };
    },
  }),
  tool<{ fund_id: string; contact_id: string }>()({
    name: 'add_fund_participant',
    title: 'Add a participant to a fund',
    description:
      'Makes a contact of the roster a participant of a fund. Both must be of this workspace; a contact takes part once.',
    annotations: CREATE,
    creates: true,
    required: ['fund_id', 'contact_id'],
    input: () => ({
      fund_id: uuid('The fund id (list_funds shows them)'),
      contact_id: uuid('The contact id (list_contacts shows them)'),
    }),
    output: {
      participant: {
        type: 'object',
        properties: {
          fund_id: { type: 'string', format: 'uuid' },
          contact_id: { type: 'string', format: 'uuid' },
          joined_at: { type: 'string', format: 'date-time' },
        },
        required: ['fund_id', 'contact_id', 'joined_at'],
      },
    },
    async run(args, { db }) {
      const row = await db.insert<{ fund_id: string; contact_id: string }>(
        'fund_participants',
        { fund_id: args.fund_id, contact_id: args.contact_id },
        'fund_id,contact_id,joined_at',
      );
      return {
        structured: { participant: row },
        summary: `Contact ${row.contact_id} now takes part in fund ${row.fund_id}.`,
      };
    },
  }),
  tool<Paging & { table?: string; record_id?: string; since?: string }>()({
    name: 'list_activity',
    title: 'List changes: who changed what',
    description:
      "Lists the changes of the workspace's records, newest first: every create, update and delete, made through any " +
      'surface or by SQL in the database, with the record before and after, when, who (the token and its scope, or the ' +
      'database) and through which surface. Filters: table, record_id, since (a date or date-time). Pages like the other ' +
      'lists. undo_change takes the id of a change.',
    annotations: READ,
    required: [],
    input: () => ({
      ...paging,
      table: { type: 'string', enum: TRACKED_TABLES, description: 'Only changes of this table' },
      record_id: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
        description: "Only changes of this record (its id; a fund participant's is fund_id/contact_id)",
      },
      since: dateOrDateTime('Only changes at or after this moment (a date means from 00:00 UTC of that day)'),
    }),
    output: { changes: array(change), ...pageOutput },
    async run(args, { db }) {
      const q = new URLSearchParams({ select: ACTIVITY_COLUMNS, order: 'at.desc,id.desc' });
      if (args.table !== undefined) q.append('table_name', `eq.${args.table}`);
      if (args.record_id !== undefined) q.append('record_id', `eq.${args.record_id}`);
      if (args.since !== undefined) q.append('at', `gte.${rangeStart(args.since)}`);
      const page = await db.page<Change>('activity', q, args.limit ?? DEFAULT_LIMIT, args.offset ?? 0);
      return { structured: { changes: page.rows, ...pageFields(page) }, summary: pageText(page, 'changes') };
    },
  }),
  tool<{ activity_id: string }>()({
    name: 'undo_change',
    title: 'Undo a change',
    description:
      'Puts the record of a change (an id from list_activity, or the activity_id an update_* or delete_* result names) back ' +
      'as it was before it: a deleted record comes back with its id (a fund with the transactions and participants its ' +
      'delete took), an update is reverted, a created record is deleted. Refused, naming the later change, when the ' +
      'record changed again since. The undo is itself a change in the log.',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    required: ['activity_id'],
    input: () => ({ activity_id: uuid('The id of the change to undo (list_activity shows them)') }),
    output: { undone: uuid('The change undone'), changes: array(change, 'The changes the undo made') },
    async run(args, { db }) {
      const changes = await db.rpc<Change[]>('undo_change', { activity_id: args.activity_id });
      const what = changes.map((c) => `${c.action} of ${c.table_name} ${c.record_id}`).join(', ');
      return {
        structured: { undone: args.activity_id, changes },
        summary: `Undid change ${args.activity_id}. The undo made: ${what || 'no change (nothing was left to put back)'}.`,
      };
    },
  }),
];

function workspaceOutput(): Record<string, JsonSchema> {
  const list = (description: string): JsonSchema => array({ type: 'string' }, description);
  return {
    name: { type: 'string' },
    currency: { type: 'string', description: "ISO 4217 code of the workspace's amounts" },
    scope: { type: 'string', enum: ['read', 'write'], description: 'read: only the read tools are offered' },
    rate_limit: {
      type: ['object', 'null'],
      description: 'Requests left in the current minute; null over stdio, which is not limited',
      properties: {
        limit: { type: 'integer' },
        remaining: { type: 'integer' },
        reset_at: { type: 'string', format: 'date-time' },
      },
    },
    expense_categories: list('category_id values of expenses'),
    fund_categories: list('category_id values of fund transactions'),
    payment_methods: list('method_id values'),
    fund_kinds: list('kind values of funds'),
  };
}

/** get_workspace and the resource tally://workspace. */
export async function workspaceInfo({ db, caller, lookups }: ToolContext): Promise<Record<string, unknown>> {
  const [[profile], rate] = await Promise.all([
    db.rpc<{ name: string; currency: string }[]>('workspace_profile', {}),
    caller.rateLimit ? caller.rateLimit() : Promise.resolve(null),
  ]);
  return {
    name: profile?.name ?? null,
    currency: profile?.currency ?? null,
    scope: caller.scope,
    rate_limit: rate,
    expense_categories: lookups.expenseCategories,
    fund_categories: lookups.fundCategories,
    payment_methods: lookups.paymentMethods,
    fund_kinds: lookups.fundKinds,
  };
}
