import type { ISql, Sql } from 'postgres';
import { oneRow } from '../engine/invariant.js';

// Operations on workspaces, shared by the CLI and the settings page. They call the tally.*
// functions of sql/app/definitions/admin.sql, which also write the audit log.

export class AdminError extends Error {}

export interface Workspace {
  id: string;
  name: string;
  currency: string;
  api_enabled: boolean;
}

export async function findWorkspace(sql: ISql, ref: string): Promise<Workspace> {
  const [ws] = await sql<Workspace[]>`
    SELECT id, name, currency, api_enabled FROM public.workspaces WHERE id = tally.find_workspace(${ref})`;
  if (!ws) throw new AdminError(`unknown workspace "${ref}"`);
  return ws;
}

// The codes this runtime's ICU knows: ISO 4217's active currencies (XYZ or EURO are refused).
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

export async function createWorkspace(
  sql: ISql,
  name: string,
  currency: string | undefined,
  actor: string,
): Promise<Workspace> {
  if (!CURRENCIES.has(currency ?? 'USD'))
    throw new AdminError(`currency must be an ISO 4217 code such as USD, got "${currency}"`);
  if (name.trim().length === 0 || name.length > 200) throw new AdminError('a workspace name has 1 to 200 characters');
  const [existing] = await sql`SELECT 1 FROM public.workspaces WHERE lower(name) = lower(${name})`;
  if (existing) throw new AdminError(`a workspace named "${name}" exists already`);
  const { id } = oneRow(
    await sql<{ id: string }[]>`SELECT tally.create_workspace(${name}, ${currency ?? null}, ${actor}) AS id`,
    'tally.create_workspace',
  );
  return findWorkspace(sql, id);
}

export async function setApiEnabled(sql: Sql, workspaceId: string, enabled: boolean, actor: string): Promise<void> {
  await sql`SELECT tally.set_api_enabled(${workspaceId}, ${enabled}, ${actor})`;
}

export async function listWorkspaces(sql: Sql): Promise<Workspace[]> {
  return sql<Workspace[]>`SELECT id, name, currency, api_enabled FROM public.workspaces ORDER BY created_at`;
}
