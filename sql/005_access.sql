-- Up Migration
-- Access: the token exchange (the rate-limit counters are the gateway's own state, in
-- sql/gateway/001_gateway_state.sql). The server connects as
-- `authenticator`, which has no table privileges (NOINHERIT), so each question it needs
-- answered is a SECURITY DEFINER function granted to authenticator itself, answering exactly
-- that question and nothing more.

-- The exchange's lookup of a workspace token by the SHA-256 of its secret. Answers the row the
-- exchange needs to decide (unknown → no row; revoked; API switch off), and marks the token as
-- used, at most about once a minute per token, so a busy client causes no write per request.
CREATE FUNCTION tally.exchange_token(hash bytea)
RETURNS TABLE (token_id uuid, workspace_id uuid, scope text, token_hash bytea, revoked boolean, api_enabled boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public
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
REVOKE EXECUTE ON FUNCTION tally.exchange_token(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.exchange_token(bytea) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.exchange_token(bytea);
