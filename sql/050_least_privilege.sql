-- Up Migration
-- Least privilege for the server's own database login and for the API roles.
--
-- 1. Row-level security by construction: every table of schema public that carries
--    workspace_id and is granted to an API role gets RLS enabled and forced, with the workspace
--    policy, here in the migrations. node-pg-migrate runs every pending migration in one
--    transaction (gateway/db/migrate.ts), so no session ever sees the grants of 002 without
--    this. policies/ stays what a DBA edits; a policy already there is left as it is.
-- 2. Functions of schema tally are executable by PUBLIC by default (a per-schema ALTER DEFAULT
--    PRIVILEGES cannot take away what the global default gives): revoke that. What the API
--    roles and authenticator need was granted to them by name, and stays.
-- 3. The pre-request check refuses an API-role JWT that names no active workspace token of the
--    right scope, or that has no expiry.

DO $$
DECLARE
  t regclass;
BEGIN
  FOR t IN
    SELECT c.oid::regclass
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
       AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'workspace_id' AND NOT a.attisdropped)
       AND EXISTS (SELECT 1 FROM unnest(ARRAY['anon', 'api_read', 'api_write']) r(role)
                    WHERE has_table_privilege(r.role, c.oid, 'SELECT, INSERT, UPDATE, DELETE'))
  LOOP
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', t);
    IF NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = t AND p.polname = 'workspace_isolation') THEN
      EXECUTE format('CREATE POLICY workspace_isolation ON %s FOR ALL TO anon, api_read, api_write '
                     'USING (workspace_id = (SELECT tally.current_workspace_id())) '
                     'WITH CHECK (workspace_id = (SELECT tally.current_workspace_id()))', t);
    END IF;
  END LOOP;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA tally FROM PUBLIC;


CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  -- The role the request runs as (SET LOCAL ROLE), not the definer this function runs as.
  api_role text := current_setting('role', true);
  -- Every JWT-borne request has claims (at least its role). None at all is the server's own
  -- read of the lookup lists: no workspace, so RLS shows it no tenant row.
  needs_token boolean := api_role IN ('api_read', 'api_write') AND claims <> '{}';
  token_id uuid;
  token record;
BEGIN
  IF NOT needs_token AND claims ->> 'sub' IS NULL THEN
    RETURN; -- no JWT (anon): RLS lets no tenant row through
  END IF;
  IF claims ->> 'sub' IS NULL THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not name a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  IF needs_token AND jsonb_typeof(claims -> 'exp') IS DISTINCT FROM 'number' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token has no expiry',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  BEGIN
    token_id := (claims ->> 'sub')::uuid;
  EXCEPTION WHEN invalid_text_representation THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not belong to a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for a new access token';
  END;
  SELECT t.revoked_at, t.workspace_id, t.scope, w.api_enabled INTO token
    FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
   WHERE t.id = token_id;
  IF NOT FOUND OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  -- A read token's access token runs as api_read only: a JWT claiming more is not one Tally made.
  IF api_role = 'api_write' AND token.scope <> 'write' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token''s role does not match the scope of its workspace token',
      HINT = 'Exchange the workspace token at /api/v1/token for an access token';
  END IF;
  IF NOT token.api_enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;

-- Down Migration
CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  token_id uuid;
  token record;
BEGIN
  IF claims ->> 'sub' IS NULL THEN
    RETURN;
  END IF;
  BEGIN
    token_id := (claims ->> 'sub')::uuid;
  EXCEPTION WHEN invalid_text_representation THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not belong to a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for a new access token';
  END;
  SELECT t.revoked_at, t.workspace_id, w.api_enabled INTO token
    FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
   WHERE t.id = token_id;
  IF NOT FOUND OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  IF NOT token.api_enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;
-- Row-level security and the revoked EXECUTE privileges stay: the tables and functions they
-- guard are dropped by the migrations that made them.
