-- Up Migration
-- A token check writes the token's last use to the token's row alone. Joined with workspaces in
-- the UPDATE, as before, it made Citus copy the workspaces' rows to a worker and commit every
-- token check (each MCP call with a workspace token, each token exchange) in two phases on the
-- workers, although only the coordinator's api_tokens changes. The workspace is read once, with
-- the token; the UPDATE names the token's row (still at most once a minute).
CREATE OR REPLACE FUNCTION tally.exchange_token(hash bytea)
RETURNS TABLE (token_id uuid, workspace_id uuid, scope text, token_hash bytea, revoked boolean, api_enabled boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  tok record;
BEGIN
  FOR tok IN
    SELECT t.id, t.workspace_id, t.scope, t.token_hash, t.revoked_at IS NOT NULL AS revoked, w.api_enabled
      FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
     WHERE t.token_hash = hash
  LOOP
    IF NOT tok.revoked AND tok.api_enabled THEN
      UPDATE api_tokens t SET last_used_at = now()
       WHERE t.id = tok.id AND t.revoked_at IS NULL
         AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
    END IF;
    token_id := tok.id;
    workspace_id := tok.workspace_id;
    scope := tok.scope;
    token_hash := tok.token_hash;
    revoked := tok.revoked;
    api_enabled := tok.api_enabled;
    RETURN NEXT;
  END LOOP;
END
$$;

-- Down Migration
CREATE OR REPLACE FUNCTION tally.exchange_token(hash bytea)
RETURNS TABLE (token_id uuid, workspace_id uuid, scope text, token_hash bytea, revoked boolean, api_enabled boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    SELECT t.id, t.workspace_id, t.scope, t.token_hash, t.revoked_at IS NOT NULL, w.api_enabled
      FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
     WHERE t.token_hash = hash;
  UPDATE api_tokens t SET last_used_at = now()
    FROM workspaces w
   WHERE t.token_hash = hash AND t.revoked_at IS NULL
     AND w.id = t.workspace_id AND w.api_enabled
     AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
END
$$;
