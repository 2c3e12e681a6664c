import type { ISql, Sql } from 'postgres';
import { newPublishableKey, sha256 } from '../secrets.js';
import { AdminError } from './workspaces.js';
import { oneRow } from '../engine/invariant.js';

// Publishable keys: the public client key (`apikey` header) of the direct table interface.

export interface KeyInfo {
  id: string;
  label: string;
  created_at: Date;
  revoked_at: Date | null;
}

export async function createKey(sql: ISql, label: string, actor: string): Promise<{ id: string; key: string }> {
  const key = newPublishableKey();
  const { id } = oneRow(
    await sql<{ id: string }[]>`SELECT tally.create_publishable_key(${label}, ${sha256(key)}, ${actor}) AS id`,
    'tally.create_publishable_key',
  );
  return { id, key };
}

export async function listKeys(sql: Sql): Promise<KeyInfo[]> {
  return sql<KeyInfo[]>`SELECT id, label, created_at, revoked_at FROM public.publishable_keys ORDER BY created_at`;
}

export async function revokeKey(sql: Sql, keyId: string, actor: string): Promise<void> {
  if (!/^[0-9a-f-]{36}$/i.test(keyId)) throw new AdminError(`"${keyId}" is not a key id`);
  const { revoked } = oneRow(
    await sql<{ revoked: boolean }[]>`SELECT tally.revoke_publishable_key(${keyId}, ${actor}) AS revoked`,
    'tally.revoke_publishable_key',
  );
  if (!revoked) throw new AdminError(`no active key with id ${keyId}`);
}
