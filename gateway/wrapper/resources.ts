import type { RequestSchemaName } from './schemas.js';

// The resources of the /api/v1 wrapper: which table each path is, its list defaults, which
// operations it offers, and what one of them answers beyond the table's row; and the live lookup
// lists. The routes (handler.ts, one generic loop) and the OpenAPI document are both built from
// these tables, so what is documented is what is served, and a new resource is an entry here.

/** Rows of a relation the caller may read, by a query in PostgREST's grammar (one gateway GET). */
type Fetch = (relation: string, query: URLSearchParams) => Promise<Record<string, unknown>[]>;

/** A named filter shown in the document besides the free-form ones (PostgREST grammar). */
interface Filter {
  name: string;
  description: string;
  example: string;
  /** A bare UUID is read as eq.<uuid> (the documented shorthand of this filter). */
  bareUuid?: true;
  /**
   * A parameter that takes a plain value, not PostgREST's grammar: `name=v` is read as
   * `column=operator.v` (GET /activity?since=2026-11-01 is at=gte.2026-11-01).
   */
  plain?: { column: string; operator: 'eq' | 'gte' };
}

/**
 * POST /{path}/{id}/{name}: a function of the database (/rest/v1/rpc/{routine}) called with the
 * record's id as its one argument; the answer is what the function returns.
 */
interface Action {
  name: string;
  operationId: string;
  summary: string;
  description: string;
  routine: string;
  argument: string;
  /** Response schema of one row the function returns (it returns a list). */
  returns: string;
}

/**
 * POST /{path}/{name}: a function of the database (/rest/v1/rpc/{routine}) called with the
 * request's body, checked against the request schema `request` first; the answer is what the
 * function returns.
 */
interface CollectionAction {
  name: string;
  operationId: string;
  summary: string;
  description: string;
  routine: string;
  request: RequestSchemaName;
  /** Response schema of one row the function returns (it returns a list). */
  returns: string;
}

/** GET /{path}/{id} of a resource whose record is more than its row. */
interface Detail {
  operationId: string;
  summary: string;
  /** Response schema of the record. */
  schema: string;
  /** The record, or undefined when there is none with the id. */
  read(fetch: Fetch, id: string): Promise<Record<string, unknown> | undefined>;
}

export interface Resource {
  /** The path segment under /api/v1, also the table's name. */
  path: string;
  relation: string;
  /** One record, in messages: "No expense with id …". */
  noun: string;
  /** Response schema of one record and of a list item. */
  record: string;
  listItem: string;
  /** Query parameters the wrapper adds when the client did not send them. */
  listDefaults: Record<string, string>;
  listSummary: string;
  create?: RequestSchemaName;
  update?: RequestSchemaName;
  remove: boolean;
  filters: Filter[];
  /** One record is more than its row (otherwise the row, `select=*`). */
  detail?: Detail;
  actions?: Action[];
  collectionActions?: CollectionAction[];
}

export const RESOURCES: Resource[] = [
  {
    path: 'personal_transactions',
    relation: 'personal_transactions',
    noun: 'expense',
    record: 'Expense',
    listItem: 'Expense',
    listDefaults: { select: '*', order: 'occurred_at.desc', limit: '20' },
    listSummary: 'List personal expenses, newest first (20 by default)',
    create: 'ExpenseCreate',
    update: 'ExpenseUpdate',
    remove: true,
    filters: [
      { name: 'category_id', description: 'Filter on the category, e.g. eq.food-drinks', example: 'eq.food-drinks' },
      {
        name: 'occurred_at',
        description: 'Filter on when it occurred, e.g. gte.2026-01-01T00:00:00Z',
        example: 'gte.2026-01-01T00:00:00Z',
      },
    ],
  },
  {
    path: 'funds',
    relation: 'funds',
    noun: 'fund',
    record: 'Fund',
    listItem: 'FundWithTransactions',
    listDefaults: { select: '*,fund_transactions(*)' },
    listSummary: 'List the funds with their transactions embedded',
    create: 'FundCreate',
    update: 'FundUpdate',
    remove: false,
    filters: [{ name: 'status', description: 'Filter on the status, e.g. eq.In Progress', example: 'eq.Upcoming' }],
    detail: {
      operationId: 'get_fund',
      summary: 'Get one fund with its balance, ledger (newest first) and participants',
      schema: 'FundDetail',
      read: fundDetail,
    },
  },
  {
    path: 'fund_transactions',
    relation: 'fund_transactions',
    noun: 'fund transaction',
    record: 'FundTransaction',
    listItem: 'FundTransaction',
    listDefaults: { order: 'occurred_at.desc' },
    listSummary: 'List fund transactions, newest first; fund_id=eq.<uuid> narrows them to one fund',
    create: 'FundTransactionCreate',
    update: 'FundTransactionUpdate',
    remove: true,
    filters: [
      {
        name: 'fund_id',
        description: 'The fund, written eq.<fund uuid> (a bare uuid is read as eq.<uuid>)',
        example: 'eq.00000000-0000-4000-8000-000000000000',
        bareUuid: true,
      },
      { name: 'category_id', description: 'Filter on the category, e.g. eq.hotel', example: 'eq.hotel' },
    ],
  },
  {
    path: 'contacts',
    relation: 'contacts',
    noun: 'contact',
    record: 'Contact',
    listItem: 'Contact',
    listDefaults: { select: '*', order: 'name.asc,id.asc' },
    listSummary: 'List the contacts (members and participants) by name',
    create: 'ContactCreate',
    update: 'ContactUpdate',
    remove: true,
    filters: [{ name: 'name', description: 'Filter on the name, e.g. ilike.*ann*', example: 'ilike.*ann*' }],
  },
  {
    // The activity log (sql/app/definitions/activity.sql): read only; the database writes it.
    path: 'activity',
    relation: 'activity',
    noun: 'change',
    record: 'Activity',
    listItem: 'Activity',
    listDefaults: { select: '*', order: 'at.desc,id.desc', limit: '20' },
    listSummary:
      "List the workspace's changes, newest first (20 by default): who changed which record, before and after",
    remove: false,
    filters: [
      {
        name: 'table',
        description: 'Only the changes of this table, e.g. personal_transactions',
        example: 'personal_transactions',
        plain: { column: 'table_name', operator: 'eq' },
      },
      {
        name: 'record_id',
        description: 'Only the changes of this record (its id)',
        example: '00000000-0000-4000-8000-000000000000',
        plain: { column: 'record_id', operator: 'eq' },
      },
      {
        name: 'since',
        description: 'Only the changes at or after this time (ISO 8601), e.g. 2026-11-01T00:00:00Z',
        example: '2026-11-01T00:00:00Z',
        plain: { column: 'at', operator: 'gte' },
      },
    ],
    actions: [
      {
        name: 'undo',
        operationId: 'undo_change',
        summary: 'Undo a change: put its record back as it was before it',
        description:
          'A deleted record comes back with its id (with what its delete took with it), an update is reverted, a ' +
          'created record is deleted. Refused with 409 (PT409), naming the later change, when the record changed ' +
          'again since; nothing is written then. Answers the changes the undo made (each undo_of names this change).',
        routine: 'undo_change',
        argument: 'activity_id',
        returns: 'Activity',
      },
    ],
    collectionActions: [
      {
        name: 'undo',
        operationId: 'undo_changes',
        summary: 'Undo several changes at once: a list of ids, one request, or a token since a moment',
        description:
          'Undoes the changes newest first, all or nothing: activity_ids (1 to 1000 changes), request_id (every ' +
          "change of one request, its Tally-Request-Id), or since (every change of the caller's token at or after " +
          'that moment, or of token_id; a change undone within the range cancels out with its undo). A refusal ' +
          '(409 PT409) names the change in the way and nothing is undone; more than 1000 changes is 413 (PT413). ' +
          'dry_run: true answers what it would do and changes nothing. Answers each record put back, in order.',
        routine: 'undo_changes',
        request: 'UndoRequest',
        returns: 'Undone',
      },
    ],
  },
];

/**
 * GET /funds/{id}: the fund, its ledger newest first, and its participants (the
 * fund_participants join with each contact embedded). Its figures come from a second call,
 * GET rpc/fund_summary (sql/app/definitions/funds.sql): the numbers the MCP tools and /rest/v1/rpc
 * give too.
 */
const FUND_DETAIL_QUERY: Record<string, string> = {
  select: '*,fund_transactions(*),fund_participants(joined_at,contacts(*))',
  'fund_transactions.order': 'occurred_at.desc,id.desc',
  'fund_participants.order': 'joined_at.asc,contact_id.asc',
};
const FUND_SUMMARY_SELECT = 'balance,income,expenses,progress,participant_count';

type FundRow = Record<string, unknown> & {
  fund_participants?: { joined_at: string; contacts: Record<string, unknown> }[];
};

async function fundDetail(fetch: Fetch, id: string): Promise<Record<string, unknown> | undefined> {
  const [[row], [summary]] = await Promise.all([
    fetch('funds', new URLSearchParams({ ...FUND_DETAIL_QUERY, id: `eq.${id}` })),
    fetch('rpc/fund_summary', new URLSearchParams({ fund_id: id, select: FUND_SUMMARY_SELECT })),
  ]);
  if (!row) return undefined;
  const { fund_participants: joins = [], ...rest } = row as FundRow;
  return {
    ...rest,
    balance: summary?.balance,
    summary: summary ?? null,
    participants: joins.map((p) => ({ ...p.contacts, joined_at: p.joined_at })),
  };
}

/** A live lookup list: GET /{path}, one fixed query, and a parameter that picks rows by a flag column. */
export interface LookupList {
  path: string;
  query: Record<string, string>;
  choice?: { param: string; flags: Record<string, string> };
}

/** GET /categories?domain=…: which flag column each domain reads. */
export const CATEGORY_DOMAINS: Record<string, string> = { expenses: 'for_expenses', funds: 'for_funds' };

export const LOOKUP_LISTS: LookupList[] = [
  {
    path: 'categories',
    query: { select: 'id,name,for_expenses,for_funds', order: 'id.asc' },
    choice: { param: 'domain', flags: CATEGORY_DOMAINS },
  },
  { path: 'payment_methods', query: { select: 'id,name', order: 'id.asc' } },
];
