import type { ISql, Sql } from 'postgres';
import { newWorkspaceToken, sha256 } from '../secrets.js';
import { AdminError } from './workspaces.js';
import { oneRow } from '../engine/invariant.js';
import { catalogue } from '../errors.js';

// Workspace tokens: minted for a scope, shown once, stored as SHA-256, revoked at once.

export type Scope = 'read' | 'write';

/**
 * Active (not revoked) tokens a workspace may have: tally.create_token (sql/app/definitions/admin.sql)
 * refuses one more, and this is the number its refusal names. Each token has a rate limit of its
 * own, so a workspace minting tokens multiplied its rate; 50 is far more than the clients a
 * workspace runs, and caps that multiple.
 */
const ACTIVE_TOKENS_PER_WORKSPACE = 50;

/** The database's refusal of a token past ACTIVE_TOKENS_PER_WORKSPACE as TLY205; anything else as it is. */
export function tokenRefusal(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code === '54000'
    ? catalogue.tooManyTokens(ACTIVE_TOKENS_PER_WORKSPACE)
    : err;
}

export interface TokenInfo {
  id: string;
  workspace_id: string;
  workspace_name: string;
  label: string;
  scope: Scope;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export function parseScope(value: string | undefined): Scope {
  if (value === 'read' || value === 'write') return value;
  throw new AdminError(`scope must be read or write, got "${value ?? ''}"`);
}

export async function createToken(
  sql: ISql,
  workspaceId: string,
  scope: Scope,
  label: string,
  actor: string,
): Promise<{ id: string; token: string }> {
  if (label.length > 200) throw new AdminError('a token label has at most 200 characters');
  const token = newWorkspaceToken();
  const rows = await sql<{ id: string }[]>`
    SELECT tally.create_token(${workspaceId}, ${scope}, ${label}, ${sha256(token)}, ${actor}) AS id`.catch(
    (err: unknown) => {
      throw tokenRefusal(err);
    },
  );
  const { id } = oneRow(rows, 'tally.create_token');
  return { id, token };
}

export async function listTokens(sql: Sql, workspaceId?: string): Promise<TokenInfo[]> {
  return sql<TokenInfo[]>`
    SELECT t.id, t.workspace_id, w.name AS workspace_name, t.label, t.scope, t.created_at, t.last_used_at, t.revoked_at
      FROM public.api_tokens t JOIN public.workspaces w ON w.id = t.workspace_id
     WHERE ${workspaceId ?? null}::uuid IS NULL OR t.workspace_id = ${workspaceId ?? null}::uuid
     ORDER BY t.created_at`;
}

/** Revokes a token; `workspaceId` limits it to one workspace (the settings page). */
export async function revokeToken(sql: Sql, tokenId: string, workspaceId: string | null, actor: string): Promise<void> {
  if (!/^[0-9a-f-]{36}$/i.test(tokenId)) throw new AdminError(`"${tokenId}" is not a token id`);
  const { revoked } = oneRow(
    await sql<{ revoked: boolean }[]>`
    SELECT tally.revoke_token(${tokenId}, ${workspaceId}, ${actor}) AS revoked`,
    'tally.revoke_token',
  );
  if (!revoked) throw new AdminError(`no active token with id ${tokenId}`);
}
