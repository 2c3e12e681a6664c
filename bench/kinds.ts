// The request kinds whose CPU per request bench/against.ts measures (and case (cpu) through it):
// one request each, sent again and again by autocannon for seconds at a time. Every send of a
// write must find what it writes, or it measures a request that does nothing: PATCH and the
// upsert go round a fixed set of existing rows, and a DELETE takes a row the database's owner
// inserted before the window (outside what is measured). The workspace also stays the size it
// was: the rows an insert added are deleted after each window. Otherwise the reads measured after
// them would read a larger table, the more so in the build that writes faster.

import type { Sql } from 'postgres';
import { oneRow } from '../gateway/engine/invariant.js';

export const KIND_TITLES: Record<string, string> = {
  list: 'GET /rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20',
  one: 'GET /rest/v1/personal_transactions?id=eq.<id> (one row)',
  embed: 'GET /rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress (bench case c)',
  insert: 'POST /rest/v1/personal_transactions (one row, return=minimal)',
  bulk: 'POST /rest/v1/personal_transactions (100 rows, return=minimal)',
  upsert: 'POST /rest/v1/personal_transactions (one existing row, resolution=merge-duplicates)',
  patch: 'PATCH /rest/v1/personal_transactions?id=eq.<id> (one row)',
  delete: 'DELETE /rest/v1/personal_transactions?id=eq.<id> (one row)',
  rpc: 'GET /rest/v1/rpc/fund_summaries',
  token: 'POST /api/v1/token (token exchange)',
  mcp: 'MCP tools/call list_expenses {limit: 20}',
  'mcp-get-fund': 'MCP tools/call get_fund',
  'mcp-create': 'MCP tools/call create_expense',
  'mcp-ping': 'MCP ping (the transport and server alone, no tool)',
};

/** What `npm run bench` measures unless BENCH_CPU_KINDS says otherwise: the kinds of the committed baseline. */
const DEFAULT_KINDS = ['list', 'one', 'insert', 'mcp'];

/** BENCH_CPU_KINDS: a list of KIND_TITLES' ids, `all`, or nothing for DEFAULT_KINDS. */
export function kindsFrom(value: string | undefined): string[] {
  if (!value) return DEFAULT_KINDS;
  if (value === 'all') return Object.keys(KIND_TITLES);
  const kinds = value.split(',').map((k) => k.trim());
  const unknown = kinds.filter((k) => !(k in KIND_TITLES));
  if (unknown.length)
    throw new Error(
      `BENCH_CPU_KINDS: no kind ${unknown.join(', ')}; the kinds: ${Object.keys(KIND_TITLES).join(', ')}`,
    );
  return kinds;
}

export interface Request {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** A request whose row changes at each send: the path and body of the next one. */
  vary?: () => { path: string; body?: string };
  /** A request that uses rows up: makes enough ready for `seconds` of sends, before they start. */
  ready?: (seconds: number) => Promise<void>;
  /** A request that adds rows: deletes them, after its sends (and outside what is measured). */
  tidy?: () => Promise<void>;
}

/** The headers of a /rest/v1 request with a workspace's access token. */
export const restHeaders = (apikey: string, jwt: string): Record<string, string> => ({
  apikey,
  authorization: `Bearer ${jwt}`,
});

/** A JSON-RPC message to /mcp with the workspace token in its URL, as an MCP client sends it. */
const mcpRequest = (token: string, message: object): Request => ({
  method: 'POST',
  path: `/mcp?token=${encodeURIComponent(token)}`,
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...message }),
});

/** A tools/call of tool `name` with `args`. */
export const toolCall = (token: string, name: string, args: object): Request =>
  mcpRequest(token, { method: 'tools/call', params: { name, arguments: args } });

export interface KindData {
  workspace: string;
  apikey: string;
  /** A write-scope access token of the workspace. */
  jwt: string;
  /** The workspace token behind it. */
  token: string;
}

const expense = (name: string, amount = 12.5) => ({ name, amount, category_id: 'essentials', method_id: 'cash' });

/**
 * The requests of `kinds` against one build, with the rows their writes need: `owner` is a
 * connection of the build's database as its owner, kept open for the DELETE's rows.
 */
export async function requestsFor(owner: Sql, data: KindData, kinds: string[]): Promise<Map<string, Request>> {
  const rest = restHeaders(data.apikey, data.jwt);
  const write = (prefer = 'return=minimal') => ({ ...rest, 'content-type': 'application/json', prefer });
  const mcp = (message: object) => mcpRequest(data.token, message);
  const tool = (name: string, args: object) => toolCall(data.token, name, args);
  // Rows the reads and the writes that go round take: ids of the workspace's expenses, apart.
  const ids = await expenseIds(owner, data.workspace, 2001);
  const [oneId] = ids;
  const patched = ids.slice(1, 1001);
  const upserted = ids.slice(1001);
  const make: Record<string, () => Promise<Request> | Request> = {
    list: () => ({
      method: 'GET',
      path: '/rest/v1/personal_transactions?select=*&order=occurred_at.desc&limit=20',
      headers: rest,
    }),
    one: () => ({ method: 'GET', path: `/rest/v1/personal_transactions?id=eq.${oneId}&select=*`, headers: rest }),
    embed: () => ({
      method: 'GET',
      path: '/rest/v1/funds?select=*,fund_transactions(*)&status=eq.In%20Progress',
      headers: rest,
    }),
    insert: () => ({
      method: 'POST',
      path: '/rest/v1/personal_transactions',
      headers: write(),
      body: JSON.stringify(expense('Bench write')),
      tidy: deleteNamed(owner, data.workspace, 'Bench write'),
    }),
    bulk: () => ({
      method: 'POST',
      path: '/rest/v1/personal_transactions',
      headers: write(),
      body: JSON.stringify(Array.from({ length: 100 }, () => expense('Bench bulk'))),
      tidy: deleteNamed(owner, data.workspace, 'Bench bulk'),
    }),
    upsert: () =>
      roundTheRows(upserted, (id, n) => ({
        method: 'POST',
        path: '/rest/v1/personal_transactions',
        headers: write('return=minimal, resolution=merge-duplicates'),
        body: JSON.stringify({ id, ...expense('Bench upsert', 10 + (n % 2)) }),
      })),
    patch: () =>
      roundTheRows(patched, (id, n) => ({
        method: 'PATCH',
        path: `/rest/v1/personal_transactions?id=eq.${id}`,
        headers: write(),
        body: JSON.stringify({ amount: 20 + (n % 2) }),
      })),
    delete: () => deletes(owner, data.workspace, write()),
    rpc: () => ({ method: 'GET', path: '/rest/v1/rpc/fund_summaries', headers: rest }),
    token: () => ({ method: 'POST', path: '/api/v1/token', headers: { authorization: `Bearer ${data.token}` } }),
    mcp: () => tool('list_expenses', { limit: 20 }),
    'mcp-get-fund': async () => tool('get_fund', { fund_id: await aFund(owner, data.workspace) }),
    'mcp-create': () => ({
      ...tool('create_expense', expense('Bench MCP write')),
      tidy: deleteNamed(owner, data.workspace, 'Bench MCP write'),
    }),
    'mcp-ping': () => mcp({ method: 'ping' }),
  };
  const requests = new Map<string, Request>();
  for (const kind of kinds) requests.set(kind, await make[kind]!());
  return requests;
}

/** A request of each of `rows` in turn, the n-th send its own (n, to change a value back and forth). */
function roundTheRows(rows: string[], request: (id: string, n: number) => Request): Request {
  let n = 0;
  const next = () => {
    n++;
    return request(rows[n % rows.length]!, n);
  };
  return { ...next(), vary: next };
}

/**
 * DELETE of one row a send: rows the owner inserts before each window (its statements are not
 * Tally's, and run before the window's CPU is read), twice as many as the fastest window used.
 */
function deletes(owner: Sql, workspace: string, headers: Record<string, string>): Request {
  const queue: string[] = [];
  // The pace of the last sends, from the rows they took over the seconds they were readied for.
  let perSecond = 500;
  let taken = 0;
  let readiedFor = 0;
  let last = '00000000-0000-0000-0000-000000000000';
  const next = () => {
    const id = queue.shift();
    if (id !== undefined) {
      last = id;
      taken++;
    }
    // Out of rows (never, when the window's pace is as measured): the last id again, a DELETE of nothing.
    return { path: `/rest/v1/personal_transactions?id=eq.${id ?? last}` };
  };
  const ready = async (seconds: number) => {
    if (readiedFor > 0) perSecond = Math.max(perSecond, taken / readiedFor);
    const wanted = Math.ceil(perSecond * seconds * 2) - queue.length;
    if (wanted > 0) {
      // Dated each a second apart, years before the workspace's rows: thousands with the one
      // timestamp of their insert, at the top of a newest-first read, made MCP list_expenses
      // (ordered by time, then id) read and sort all of them (1-4 ms of Postgres, not 0.4).
      const rows = await owner<{ id: string }[]>`
        INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at)
        SELECT ${workspace}::uuid, 'Bench delete', 3, 'other', 'cash', now() - interval '10 years' - make_interval(secs => g)
          FROM generate_series(1, ${wanted}::int) AS g
        RETURNING id::text`;
      queue.push(...rows.map((r) => r.id));
    }
    taken = 0;
    readiedFor = seconds;
  };
  return { method: 'DELETE', headers, ...next(), vary: next, ready };
}

/**
 * Deletes the expenses of `name` an insert added, and vacuums them away. Without the triggers
 * (session_replication_role = replica, as bench/data.ts loads the rows): each of them, run for
 * 30,000 rows of the bulk insert, took the owner minutes.
 */
const deleteNamed = (owner: Sql, workspace: string, name: string) => async () => {
  const gone = await owner.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    return (
      await tx`DELETE FROM public.personal_transactions WHERE workspace_id = ${workspace}::uuid AND name = ${name}`
    ).count;
  });
  if (gone > 0) await owner`VACUUM public.personal_transactions`;
};

async function expenseIds(owner: Sql, workspace: string, count: number): Promise<string[]> {
  const rows = await owner<{ id: string }[]>`
    SELECT id::text FROM public.personal_transactions WHERE workspace_id = ${workspace}::uuid
     ORDER BY occurred_at DESC OFFSET 100 LIMIT ${count}`;
  if (rows.length < count) throw new Error(`the bench needs ${count + 100} expenses in its workspace`);
  return rows.map((r) => r.id);
}

async function aFund(owner: Sql, workspace: string): Promise<string> {
  return oneRow(
    await owner<{ id: string }[]>`
      SELECT id::text FROM public.funds WHERE workspace_id = ${workspace}::uuid ORDER BY id LIMIT 1`,
    'a fund',
  ).id;
}
