import type { Pool } from '../engine/pool.js';
import { newWorkspaceToken, sha256 } from '../secrets.js';
import { tokenRefusal, type Scope } from '../admin/tokens.js';
import { oneRow } from '../engine/invariant.js';

// The settings page's only way into the database: the tally.settings_* functions of
// sql/app/definitions/settings.sql, called on the server's `authenticator` pool. Every call after sign-in
// carries the SHA-256 of the session cookie; the database checks the session, the membership
// and the role itself, and changes go through the CLI's own functions (audit log included).

type MemberRole = 'owner' | 'admin' | 'member';

export interface Session {
  hash: Buffer;
  userId: string;
  email: string;
  csrfToken: string;
  expiresAt: Date;
  /** The user still has the one-time password `tally member add` generated. */
  passwordTemporary: boolean;
}

export interface MemberWorkspace {
  id: string;
  name: string;
  role: MemberRole;
  api_enabled: boolean;
}

export interface TokenRow {
  id: string;
  label: string;
  scope: Scope;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface SignInLimits {
  perAddress: number;
  perAccount: number;
  windowSeconds: number;
}

/** Counts an attempt; the seconds to wait while the address, or this email from it, is delayed, else 0. */
export async function countSignInAttempt(
  db: Pool,
  address: string,
  email: string,
  limits: SignInLimits,
): Promise<number> {
  const { wait } = oneRow(
    await db<{ wait: number }[]>`
    SELECT tally.settings_sign_in_attempt(${address}, ${email}, ${limits.perAddress}, ${limits.perAccount}, ${limits.windowSeconds}) AS wait`,
    'tally.settings_sign_in_attempt',
  );
  return wait;
}

export async function credentials(
  db: Pool,
  email: string,
): Promise<{ user_id: string; password_hash: string | null } | undefined> {
  const [row] = await db<{ user_id: string; password_hash: string | null }[]>`
    SELECT user_id, password_hash FROM tally.settings_credentials(${email})`;
  return row;
}

export async function createSession(
  db: Pool,
  userId: string,
  hash: Buffer,
  csrfToken: string,
  lifetimeSeconds: number,
  address: string,
): Promise<Date> {
  const { expires_at } = oneRow(
    await db<{ expires_at: Date }[]>`
    SELECT tally.settings_session_create(${userId}, ${hash}, ${csrfToken}, ${lifetimeSeconds}, ${address}) AS expires_at`,
    'tally.settings_session_create',
  );
  return expires_at;
}

export async function findSession(db: Pool, hash: Buffer): Promise<Session | undefined> {
  const [row] = await db<
    { user_id: string; email: string; csrf_token: string; expires_at: Date; password_temporary: boolean }[]
  >`
    SELECT user_id, email, csrf_token, expires_at, password_temporary FROM tally.settings_session(${hash})`;
  return (
    row && {
      hash,
      userId: row.user_id,
      email: row.email,
      csrfToken: row.csrf_token,
      expiresAt: row.expires_at,
      passwordTemporary: row.password_temporary,
    }
  );
}

/** Sets the session user's password (the current one checked by the caller); ends their other sessions. */
export async function changePassword(db: Pool, session: Session, passwordHash: string, address: string): Promise<void> {
  await db`SELECT tally.settings_change_password(${session.hash}, ${passwordHash}, ${address})`;
}

export async function endSession(db: Pool, hash: Buffer): Promise<void> {
  await db`SELECT tally.settings_session_end(${hash})`;
}

export function workspacesOf(db: Pool, session: Session): Promise<MemberWorkspace[]> {
  return db<MemberWorkspace[]>`SELECT id, name, role, api_enabled FROM tally.settings_workspaces(${session.hash})`;
}

export function tokensOf(db: Pool, session: Session, workspaceId: string): Promise<TokenRow[]> {
  return db<TokenRow[]>`
    SELECT id, label, scope, created_at, last_used_at, revoked_at FROM tally.settings_tokens(${session.hash}, ${workspaceId})`;
}

/** One change of a workspace's records, as its settings page lists it. */
export interface ActivityRow {
  at: Date;
  table_name: string;
  record_id: string;
  action: string;
  actor: string;
  token_name: string | null;
  scope: string | null;
  member: string | null;
  surface: string;
  undo_of: string | null;
}

/** The latest changes of a workspace the session's user is a member of, newest first. */
export function activityOf(db: Pool, session: Session, workspaceId: string, max: number): Promise<ActivityRow[]> {
  return db<ActivityRow[]>`
    SELECT at, table_name, record_id, action, actor, token_name, scope, member, surface, undo_of
      FROM tally.settings_activity(${session.hash}, ${workspaceId}, ${max})`;
}

/**
 * Mints a token as the session's member; the secret is made here and only its hash is sent. A
 * workspace at its maximum of active tokens is refused with TLY205 (an ApiError).
 */
export async function createTokenAs(
  db: Pool,
  session: Session,
  workspaceId: string,
  scope: Scope,
  label: string,
): Promise<{ id: string; token: string }> {
  const token = newWorkspaceToken();
  const rows = await db<{ id: string }[]>`
    SELECT tally.settings_create_token(${session.hash}, ${workspaceId}, ${scope}, ${label}, ${sha256(token)}) AS id`.catch(
    (err: unknown) => {
      throw tokenRefusal(err);
    },
  );
  const { id } = oneRow(rows, 'tally.settings_create_token');
  return { id, token };
}

/** False when the workspace has no active token with that id. */
export async function revokeTokenAs(
  db: Pool,
  session: Session,
  workspaceId: string,
  tokenId: string,
): Promise<boolean> {
  const { revoked } = oneRow(
    await db<{ revoked: boolean }[]>`
    SELECT tally.settings_revoke_token(${session.hash}, ${workspaceId}, ${tokenId}) AS revoked`,
    'tally.settings_revoke_token',
  );
  return revoked;
}

export async function setApiEnabledAs(
  db: Pool,
  session: Session,
  workspaceId: string,
  enabled: boolean,
): Promise<void> {
  await db`SELECT tally.settings_set_api_enabled(${session.hash}, ${workspaceId}, ${enabled})`;
}
