-- The pre-request check: run in every request's transaction (TALLY_DB_PRE_REQUEST, on every
-- surface), as PostgREST runs its db-pre-request function. A JWT outlives neither the revocation
-- of its workspace token nor the workspace's API switch: both are read here, on every request,
-- so they act on the very next one. SQLSTATE PT401/PT403 carry the HTTP status, as PostgREST's
-- convention for raised errors has it.
--
-- To change it, edit this file and run `tally migrate`: the file is applied again when its text
-- changes, and every server picks the new check up with its next request.
--
-- It reads the token and its workspace in one statement (a plan PL/pgSQL keeps): every request
-- runs it, and each statement a function runs costs Postgres an executor's start and end
-- besides its reads. On a Citus coordinator, `tally migrate`'s Citus step
-- (sql/extensions/citus/) puts schema tally_shard before public in this function's search_path:
-- there api_tokens and workspaces name views of the one shard of each table that the node holds,
-- so the read does not go through Citus (which plans a statement on its tables anew at every
-- call). The text below is the same on every deployment.
CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
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
  SELECT t.revoked_at, t.workspace_id, t.scope, w.api_enabled AS enabled INTO token
    FROM api_tokens t LEFT JOIN workspaces w ON w.id = t.workspace_id
   WHERE t.id = token_id;
  -- No such token, or no such workspace: enabled is NULL.
  IF token.enabled IS NULL OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  -- A read token's access token runs as api_read only: a JWT claiming more is not one Tally made.
  IF api_role = 'api_write' AND token.scope <> 'write' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token''s role does not match the scope of its workspace token',
      HINT = 'Exchange the workspace token at /api/v1/token for an access token';
  END IF;
  IF NOT token.enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.check_request() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.check_request() TO anon, api_read, api_write;
