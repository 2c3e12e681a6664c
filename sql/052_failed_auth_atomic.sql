-- Up Migration
-- The failed-authentication limit, exact under concurrency. Before, a process read the
-- address's failures, looked the token up, and counted a failure afterwards: sixty guesses
-- sent at once all read "under the limit" before any was counted. Now the check, the lookup
-- and the count are one call that holds a per-address lock for its transaction, so guesses
-- from one address are decided one after the other, and the limit holds across processes.
-- Only failures are counted: a valid token waits for the lock a moment but never counts.

CREATE FUNCTION tally.authenticate_token(hash bytea, client_key text, max_failures integer, window_ms integer)
RETURNS TABLE (limited boolean, failures integer, reset_at timestamptz,
               token_id uuid, workspace_id uuid, scope text, token_hash bytea, revoked boolean, api_enabled boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
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

-- Down Migration
DROP FUNCTION IF EXISTS tally.authenticate_token(bytea, text, integer, integer);
