// Case (f) of `npm run bench`: the figures of a workspace of 2,000 funds (balance, income,
// expenses, progress, participants), each request timed on its own, one after another: the
// set-based rpc/fund_summaries, the computed fields summary and balance (functions of one row,
// which Postgres calls for each fund), and MCP list_funds (which reads rpc/fund_summaries and the
// funds). The target is 300 ms a request. On Citus (case k) the same workspace is measured on the
// cluster and on the plain server beside it. What each request costs in statements is counted,
// not timed, by tests/fund-figures-costs.test.ts.

import type { Sql } from 'postgres';
import { workspaceWithToken, type BenchWorkspace } from './data.js';
import { restHeaders, toolCall, type Request } from './kinds.js';

export const FUND_FIGURES_FUNDS = 2000;
export const FUND_FIGURES_TARGET_MS = 300;

/** The requests, by name: each answers every fund of the workspace. */
const REQUESTS: Record<string, (ws: BenchWorkspace, apikey: string) => Request> = {
  'GET /rest/v1/rpc/fund_summaries': (ws, apikey) => rest('rpc/fund_summaries', ws, apikey),
  'GET /rest/v1/funds?select=*,summary': (ws, apikey) => rest('funds?select=*,summary', ws, apikey),
  'GET /rest/v1/funds?select=id,balance': (ws, apikey) => rest('funds?select=id,balance', ws, apikey),
  'MCP tools/call list_funds': (ws) => toolCall(ws.token, 'list_funds', {}),
};

const rest = (path: string, ws: BenchWorkspace, apikey: string): Request => ({
  method: 'GET',
  path: `/rest/v1/${path}`,
  headers: restHeaders(apikey, ws.jwt),
});

/**
 * A workspace of `funds` funds, each with an income of 30, an expense of 10 and one participant,
 * made set-based as the owner (`sql`, a superuser).
 */
export async function fundsWorkspace(sql: Sql, jwtSecret: string, funds = FUND_FIGURES_FUNDS): Promise<BenchWorkspace> {
  const ws = await workspaceWithToken(sql, 'Bench funds', 0, jwtSecret);
  await sql`
    INSERT INTO public.funds (workspace_id, name, target_amount)
    SELECT ${ws.id}::uuid, 'Fund ' || g, 100 FROM generate_series(1, ${funds}::int) AS g`;
  await sql`
    INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
    SELECT f.workspace_id, f.id, x.name, x.amount, x.category, 'cash'
      FROM public.funds f, (VALUES ('in', 30, 'fund-income'), ('out', -10, 'hotel')) x(name, amount, category)
     WHERE f.workspace_id = ${ws.id}::uuid`;
  const [contact] = await sql<{ id: string }[]>`
    INSERT INTO public.contacts (workspace_id, name) VALUES (${ws.id}::uuid, 'Bench participant') RETURNING id`;
  await sql`
    INSERT INTO public.fund_participants (workspace_id, fund_id, contact_id)
    SELECT f.workspace_id, f.id, ${contact!.id}::uuid FROM public.funds f WHERE f.workspace_id = ${ws.id}::uuid`;
  await sql`ANALYZE public.funds, public.fund_transactions, public.fund_participants`;
  return ws;
}

/** How many funds an answer holds: the rows of a /rest/v1 read, or list_funds's funds. */
function fundsIn(body: unknown): number {
  if (Array.isArray(body)) return body.length;
  const result = (body as { result?: { isError?: boolean; structuredContent?: { funds?: unknown[] } } }).result;
  return result?.isError ? -1 : (result?.structuredContent?.funds?.length ?? -1);
}

/**
 * Each request's time at `base` (a Tally), the median of `sends` after one send to warm up, in
 * ms. A request that does not answer every fund stops the case: a fast wrong answer is no figure.
 */
export async function timeFundFigures(
  base: string,
  ws: BenchWorkspace,
  apikey: string,
  funds = FUND_FIGURES_FUNDS,
  sends = 5,
): Promise<Record<string, number>> {
  const figures: Record<string, number> = {};
  for (const [name, make] of Object.entries(REQUESTS)) {
    const { method, path, headers, body: sent } = make(ws, apikey);
    const times: number[] = [];
    for (let i = 0; i <= sends; i++) {
      const started = performance.now();
      const res = await fetch(base + path, { method, headers, body: sent });
      const body: unknown = await res.json();
      const ms = performance.now() - started;
      if (res.status !== 200 || fundsIn(body) !== funds)
        throw new Error(`case (f) ${name} answered ${res.status} with ${fundsIn(body)} funds, not ${funds}`);
      if (i > 0) times.push(ms);
    }
    times.sort((a, b) => a - b);
    figures[name] = Math.round(times[Math.floor(times.length / 2)]!);
  }
  return figures;
}
