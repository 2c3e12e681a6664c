// The benchmark's database: Tally's own embedded Postgres in a temporary home, migrated, with
// generated workspaces. Rows are generated set-based (INSERT … SELECT generate_series) as the
// owner, never row by row: two million rows take seconds, not minutes.

import type { Sql, TransactionSql } from 'postgres';

type Db = Sql | TransactionSql;
import { createKey } from '../gateway/admin/keys.js';
import { createToken } from '../gateway/admin/tokens.js';
import { createWorkspace } from '../gateway/admin/workspaces.js';
import { jwtKeys, signAccessToken } from '../gateway/auth/jwt.js';

export interface BenchWorkspace {
  id: string;
  rows: number;
  /** A write-scope access token (JWT) for the workspace, as the exchange would mint it. */
  jwt: string;
  /** The workspace token behind it (for MCP). */
  token: string;
}

/** Categories offered to expenses and payment methods: generated rows cycle through them. */
const CATEGORIES = [
  'essentials',
  'food-drinks',
  'local-transport',
  'entertainment',
  'fixed-expenses',
  'clothing',
  'sports',
  'travel',
];
const METHODS = ['cash', 'credit-card', 'bank-transfer', 'mobile-wallet'];

/** `rows` expenses for one workspace, spread over the last ~3 years, in one statement. */
export async function generateExpenses(sql: Db, workspaceId: string, rows: number): Promise<void> {
  await sql`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id, occurred_at, note)
    SELECT ${workspaceId}::uuid,
           'Expense ' || g,
           round((1 + (g::bigint * 7919 % 50000) / 100.0)::numeric, 2),
           (${CATEGORIES}::text[])[1 + g % ${CATEGORIES.length}],
           (${METHODS}::text[])[1 + g % ${METHODS.length}],
           now() - make_interval(secs => (g::bigint * 937) % (3 * 365 * 86400)),
           CASE WHEN g % 5 = 0 THEN 'Note ' || g END
      FROM generate_series(1, ${rows}::int) AS g`;
}

/** A few funds, a third of them In Progress, each with a short ledger (case c's embed). */
async function generateFunds(sql: Db, workspaceId: string, funds: number, perFund: number): Promise<void> {
  await sql`
    INSERT INTO public.funds (workspace_id, name, kind, status, currency)
    SELECT ${workspaceId}::uuid, 'Fund ' || g, 'Travel', (ARRAY['Upcoming', 'In Progress', 'Completed'])[1 + g % 3], 'USD'
      FROM generate_series(1, ${funds}::int) AS g`;
  await sql`
    INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id, occurred_at)
    SELECT f.workspace_id, f.id, 'Entry ' || g, CASE WHEN g % 4 = 0 THEN -25 ELSE 50 END,
           CASE WHEN g % 4 = 0 THEN 'hotel' ELSE 'fund-income' END, 'bank-transfer',
           now() - make_interval(days => g)
      FROM public.funds f, generate_series(1, ${perFund}::int) AS g
     WHERE f.workspace_id = ${workspaceId}::uuid`;
}

export interface Dataset {
  main: BenchWorkspace;
  small: BenchWorkspace;
  large: BenchWorkspace | undefined;
  others: number;
  apikey: string;
  generationSeconds: number;
}

export interface DatasetOptions {
  mainRows: number;
  otherWorkspaces: number;
  otherRows: number;
  /** 0 to skip the large workspace of the growth case. */
  largeRows: number;
  jwtSecret: string;
  log: (line: string) => void;
}

export async function workspaceWithToken(
  sql: Sql,
  name: string,
  rows: number,
  secret: string,
): Promise<BenchWorkspace> {
  const ws = await createWorkspace(sql, name, 'USD', 'bench');
  const { id: tokenId, token } = await createToken(sql, ws.id, 'write', 'bench', 'bench');
  // One hour is longer than any benchmark run.
  const jwt = await signAccessToken(jwtKeys(secret), {
    role: 'api_write',
    workspace_id: ws.id,
    scope: 'write',
    sub: tokenId,
  });
  return { id: ws.id, rows, jwt, token };
}

export async function generateDataset(sql: Sql, o: DatasetOptions): Promise<Dataset> {
  const started = Date.now();
  // Workspaces and tokens through the admin functions, as `tally workspace create` makes them.
  const main = await workspaceWithToken(sql, 'Bench main', o.mainRows, o.jwtSecret);
  const others: BenchWorkspace[] = [];
  for (let i = 1; i <= o.otherWorkspaces; i++)
    others.push(await workspaceWithToken(sql, `Bench other ${i}`, o.otherRows, o.jwtSecret));
  const large = o.largeRows > 0 ? await workspaceWithToken(sql, 'Bench large', o.largeRows, o.jwtSecret) : undefined;
  const [small] = others;
  if (small === undefined) throw new Error('the benchmark needs at least one other workspace');

  // The rows: the owner (a superuser) bypasses RLS; generated rows are valid by construction,
  // so the per-row category trigger and foreign-key checks are skipped for the load
  // (session_replication_role = replica), and commits need not wait for the WAL flush.
  await sql.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx`SET LOCAL synchronous_commit = off`;
    await generateExpenses(tx, main.id, o.mainRows);
    await generateFunds(tx, main.id, 30, 20);
  });
  o.log(`  main workspace: ${o.mainRows.toLocaleString('en')} expenses`);
  for (const ws of others) {
    await sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`SET LOCAL synchronous_commit = off`;
      await generateExpenses(tx, ws.id, o.otherRows);
    });
  }
  o.log(`  ${others.length} other workspaces: ${o.otherRows.toLocaleString('en')} expenses each`);
  if (large) {
    await sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`SET LOCAL synchronous_commit = off`;
      await generateExpenses(tx, large.id, o.largeRows);
    });
    o.log(`  large workspace: ${o.largeRows.toLocaleString('en')} expenses`);
  }
  // Hint bits and statistics set, and the generated pages written out now: otherwise the
  // checkpointer spreads those writes over the first minutes of measuring.
  await sql`VACUUM ANALYZE`;
  await sql`CHECKPOINT`;
  const { key } = await createKey(sql, 'bench', 'bench');
  return {
    main,
    small,
    large,
    others: others.length,
    apikey: key,
    generationSeconds: (Date.now() - started) / 1000,
  };
}
