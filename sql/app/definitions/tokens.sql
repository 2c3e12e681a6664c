-- Workspace tokens on the server's own login (authenticator), which has no table privileges
-- (NOINHERIT): each question the server needs answered is a SECURITY DEFINER function granted to
-- authenticator itself, answering exactly that question and nothing more (search_path with
-- pg_temp last: see sql/gateway/definitions/login.sql).

-- The exchange's lookup of a workspace token by the SHA-256 of its secret. Answers the row the
-- exchange needs to decide (unknown → no row; revoked; API switch off), and marks the token as
-- used, at most about once a minute per token, so a busy client causes no write per request.
-- The last use is written to the token's row alone: joined with workspaces in the UPDATE, Citus
-- would copy the workspaces' rows to a worker and commit every token check in two phases.
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
REVOKE EXECUTE ON FUNCTION tally.exchange_token(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.exchange_token(bytea) TO authenticator;

-- The failed-authentication limit, exact under concurrency: the check, the lookup and the count
-- are one call that holds a per-address lock for its transaction, so guesses from one address
-- are decided one after the other, and the limit holds across processes. Only failures are
-- counted: a valid token waits for the lock a moment but never counts. A token made after the
-- address's failures began is answered while the address is blocked (no guess of that window
-- can have been aimed at it): whoever mistyped a token and then made a new one is not kept
-- waiting; older tokens and guesses are refused before anything is said about them.
CREATE OR REPLACE FUNCTION tally.authenticate_token(hash bytea, client_key text, max_failures integer, window_ms integer)
RETURNS TABLE (limited boolean, failures integer, reset_at timestamptz,
               token_id uuid, workspace_id uuid, scope text, token_hash bytea, revoked boolean, api_enabled boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  seen_hits integer;
  seen_reset timestamptz;
  tok record;
  has_token boolean := false;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('tally.failed_auth:' || client_key, 0));
  SELECT r.hits, r.reset_at INTO seen_hits, seen_reset
    FROM rate_limits r WHERE r.key = client_key AND r.reset_at > clock_timestamp();
  IF seen_hits >= max_failures THEN
    -- A token made since this window's failures began answers: none of them guessed it, and
    -- whoever mistyped a token and then made a new one is not kept waiting. Any older token,
    -- and every guess, is refused without a word on whether it exists.
    IF hash IS NOT NULL AND EXISTS (
         SELECT 1 FROM public.api_tokens t
          WHERE t.token_hash = hash AND t.revoked_at IS NULL
            AND t.created_at > seen_reset - window_ms * interval '1 millisecond') THEN
      FOR tok IN SELECT * FROM exchange_token(hash) LOOP
        RETURN QUERY SELECT false, seen_hits, seen_reset, tok.token_id, tok.workspace_id, tok.scope, tok.token_hash, tok.revoked, tok.api_enabled;
        RETURN;
      END LOOP;
    END IF;
    RETURN QUERY SELECT true, seen_hits, seen_reset, NULL::uuid, NULL::uuid, NULL::text, NULL::bytea, NULL::boolean, NULL::boolean;
    RETURN;
  END IF;
  IF hash IS NOT NULL THEN
    FOR tok IN SELECT * FROM exchange_token(hash) LOOP
      has_token := true;
      IF tok.token_hash = hash AND NOT tok.revoked THEN
        RETURN QUERY SELECT false, coalesce(seen_hits, 0), seen_reset, tok.token_id, tok.workspace_id, tok.scope, tok.token_hash, tok.revoked, tok.api_enabled;
        RETURN;
      END IF;
    END LOOP;
  END IF;
  -- Missing, malformed, unknown or revoked: one failure for this address.
  SELECT t.hits, t.reset_at INTO seen_hits, seen_reset FROM rate_limit_take(client_key, window_ms, 1) t;
  IF has_token THEN
    RETURN QUERY SELECT false, seen_hits, seen_reset, tok.token_id, tok.workspace_id, tok.scope, tok.token_hash, tok.revoked, tok.api_enabled;
  ELSE
    RETURN QUERY SELECT false, seen_hits, seen_reset, NULL::uuid, NULL::uuid, NULL::text, NULL::bytea, NULL::boolean, NULL::boolean;
  END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.authenticate_token(bytea, text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.authenticate_token(bytea, text, integer, integer) TO authenticator;

-- The label of a workspace token, for the claims the server signs (the activity log names the
-- token that made a change; its trigger cannot look the label up on a Citus worker).
CREATE OR REPLACE FUNCTION tally.token_label(token uuid) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT t.label FROM public.api_tokens t WHERE t.id = token $$;
REVOKE EXECUTE ON FUNCTION tally.token_label(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.token_label(uuid) TO authenticator;
