import type { Sql } from 'postgres';
import { hashPassword, newPassword, passwordProblem } from './passwords.js';
import { AdminError } from './workspaces.js';
import { oneRow } from '../engine/invariant.js';

// Workspace members: the people who sign in to the settings pages. The CLI adds them (there
// is no sign-up); tally.add_member writes the credentials, the membership and the audit log.

export type Role = 'owner' | 'admin' | 'member';

export function parseRole(value: string | undefined): Role {
  if (value === 'owner' || value === 'admin' || value === 'member') return value;
  throw new AdminError(`role must be owner, admin or member, got "${value ?? ''}"`);
}

export interface AddedMember {
  userId: string;
  /** The user was created now (not only given a membership). */
  created: boolean;
  /** The password generated now, to be shown once; undefined when one was given or kept. */
  generatedPassword?: string;
}

/**
 * Adds `email` to a workspace with `role`. A new user gets `password`, or a generated one
 * that is returned to be shown once and must be changed at the first sign-in. A known user keeps their password unless one is given,
 * which then replaces it (and ends their sessions).
 */
export async function addMember(
  sql: Sql,
  workspaceId: string,
  email: string,
  role: Role,
  password: string | undefined,
  actor: string,
): Promise<AddedMember> {
  const address = email.trim();
  if (!/^[^@\s]+@[^@\s]+$/.test(address) || address.length > 320)
    throw new AdminError(`"${email}" is not an email address`);
  if (password !== undefined) {
    const problem = passwordProblem(password);
    if (problem) throw new AdminError(problem);
  }
  const [known] = await sql`SELECT 1 FROM public.user_credentials WHERE lower(email) = lower(${address})`;
  const generatedPassword = !known && password === undefined ? newPassword() : undefined;
  const chosen = password ?? generatedPassword;
  const hash = chosen === undefined ? null : await hashPassword(chosen);
  const row = await sql.begin(async (tx) => {
    const added = oneRow(
      await tx<{ user_id: string; created: boolean }[]>`
      SELECT user_id, created FROM tally.add_member(${workspaceId}, ${address}, ${role}, ${hash}, ${actor})`,
      'tally.add_member',
    );
    // A generated password is known to the operator: the member must replace it at first sign-in.
    if (hash !== null)
      await tx`UPDATE public.user_credentials SET password_temporary = ${generatedPassword !== undefined} WHERE id = ${added.user_id}`;
    return added;
  });
  return { userId: row.user_id, created: row.created, generatedPassword };
}
