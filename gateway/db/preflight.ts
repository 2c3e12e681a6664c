import type { Sql } from 'postgres';
import type { Config } from '../config.js';
import { oneRow } from '../engine/invariant.js';

// Checks `tally serve` makes before it listens, on its own login, so that a deployment that
// would serve too much never starts: each failure is one line that says what to fix.

class PreflightError extends Error {}

/** What the database holds besides its own tables: the finance app's state is optional. */
export interface DatabaseState {
  /** Workspaces, tokens and the token exchange: the app's surfaces (surfaces.ts) can serve. */
  app: boolean;
}

/**
 * The gateway's own state (sql/gateway/) must be there, or every request would fail: one line
 * that says how to install it, before the server listens. Read from the catalogue, which any
 * login may read.
 */
export async function databaseState(db: Sql, config: Config): Promise<DatabaseState> {
  const [preRequestSchema, preRequestName] = config.preRequest?.includes('.')
    ? config.preRequest.split('.')
    : [undefined, config.preRequest];
  const state = oneRow(
    await db<{ gateway: boolean; app: boolean; pre_request: boolean }[]>`
    WITH procs AS (
      SELECT n.nspname, p.proname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    )
    SELECT (SELECT count(DISTINCT proname) = 3 FROM procs
             WHERE nspname = 'tally' AND proname IN ('jwt_claims', 'publishable_key_active', 'rate_limit_take')) AS gateway,
           EXISTS (SELECT 1 FROM procs WHERE nspname = 'tally' AND proname = 'exchange_token')
             AND to_regclass('public.workspaces') IS NOT NULL AS app,
           ${preRequestName ?? null}::text IS NULL
             OR EXISTS (SELECT 1 FROM procs WHERE proname = ${preRequestName ?? null} AND (${preRequestSchema ?? null}::text IS NULL OR nspname = ${preRequestSchema ?? null})) AS pre_request`,
    "the database's state",
  );
  if (!state.gateway) {
    throw new PreflightError(
      'the database has no Tally gateway state (schema tally and its functions): run "tally migrate --gateway-only" on it first, or "tally migrate" for the finance app',
    );
  }
  if (!state.pre_request) {
    throw new PreflightError(
      `the pre-request function ${config.preRequest} does not exist in the database: create it, or set TALLY_DB_PRE_REQUEST to empty for none`,
    );
  }
  return { app: state.app };
}

export async function preflight(db: Sql, config: Config): Promise<void> {
  // The login must not be able to step around the API roles: no superuser, no BYPASSRLS, and
  // no membership in a role other than the API roles (a SET ROLE to the owner would be one).
  const login = oneRow(
    await db<{ name: string; rolsuper: boolean; rolbypassrls: boolean; others: string[] }[]>`
    SELECT r.rolname AS name, r.rolsuper, r.rolbypassrls,
           coalesce(array_agg(g.rolname ORDER BY g.rolname) FILTER (WHERE g.rolname <> ALL (${config.apiRoles}::text[])), '{}') AS others
      FROM pg_roles r
      LEFT JOIN pg_auth_members m ON m.member = r.oid
      LEFT JOIN pg_roles g ON g.oid = m.roleid
     WHERE r.rolname = session_user
     GROUP BY r.rolname, r.rolsuper, r.rolbypassrls`,
    "the session user's role",
  );
  if (login.rolsuper || login.rolbypassrls) {
    throw new PreflightError(
      `the server's database login "${login.name}" is a superuser or bypasses RLS; log in as authenticator (TALLY_DB_URI)`,
    );
  }
  if (login.others.length > 0) {
    throw new PreflightError(
      `the server's database login "${login.name}" is a member of ${login.others.join(', ')}, not only of the API roles (${config.apiRoles.join(', ')})`,
    );
  }
  // A tenant table that is not isolated does not stop the start: the schema cache leaves it out
  // (engine/schema-cache/isolation.ts), at start as after every reload, and the log names it.
}
