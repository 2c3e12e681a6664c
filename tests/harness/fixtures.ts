import type { Sql } from 'postgres';
import { createWorkspace } from '../../gateway/admin/workspaces.js';
import { createToken, type Scope } from '../../gateway/admin/tokens.js';
import { first } from './present.js';

// Small, explicit data for tests: a workspace with one of everything, written as the owner.

/**
 * The tenant tables: the tables of public with a workspace_id that an API role may read, each
 * isolated by a policy. The one list the suites iterate over; tests/isolation.test.ts fails
 * when it is not the database's (tenantTablesOf), and when workspaceWithData leaves one empty.
 */
export const TENANT_TABLES = [
  'activity',
  'contacts',
  'fund_participants',
  'fund_transactions',
  'funds',
  'personal_transactions',
];

/** The tenant tables the database has, by the definition above, sorted. */
export async function tenantTablesOf(sql: Sql): Promise<string[]> {
  const rows = await sql<{ relname: string }[]>`
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
       AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'workspace_id' AND NOT a.attisdropped)
       AND (has_table_privilege('api_read', c.oid, 'SELECT') OR has_table_privilege('api_write', c.oid, 'SELECT'))
     ORDER BY c.relname`;
  return rows.map((r) => r.relname);
}

export interface WorkspaceFixture {
  id: string;
  name: string;
  fundId: string;
  contactId: string;
  expenseId: string;
  fundTransactionId: string;
}

let counter = 0;

export async function workspaceWithData(sql: Sql, name = `ws-${process.pid}-${++counter}`): Promise<WorkspaceFixture> {
  const ws = await createWorkspace(sql, name, 'EUR', 'test');
  const { id: fundId } = first(
    await sql<{ id: string }[]>`
    INSERT INTO public.funds (workspace_id, name, kind, target_amount) VALUES (${ws.id}, ${name + ' fund'}, 'Travel', 1000) RETURNING id`,
  );
  const { id: contactId } = first(
    await sql<{ id: string }[]>`
    INSERT INTO public.contacts (workspace_id, name, phone) VALUES (${ws.id}, ${name + ' contact'}, '+1 555 0100') RETURNING id`,
  );
  const { id: expenseId } = first(
    await sql<{ id: string }[]>`
    INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
    VALUES (${ws.id}, ${name + ' lunch'}, 12.5, 'food-drinks', 'cash') RETURNING id`,
  );
  const { id: fundTransactionId } = first(
    await sql<{ id: string }[]>`
    INSERT INTO public.fund_transactions (workspace_id, fund_id, name, amount, category_id, method_id)
    VALUES (${ws.id}, ${fundId}, 'Contribution', 100, 'fund-income', 'bank-transfer') RETURNING id`,
  );
  await sql`INSERT INTO public.fund_participants (workspace_id, fund_id, contact_id) VALUES (${ws.id}, ${fundId}, ${contactId})`;
  return { id: ws.id, name, fundId, contactId, expenseId, fundTransactionId };
}

export async function tokenFor(sql: Sql, workspaceId: string, scope: Scope): Promise<{ id: string; token: string }> {
  return createToken(sql, workspaceId, scope, `test ${scope}`, 'test');
}
