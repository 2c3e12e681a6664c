-- Up Migration
-- The failed-authentication limit blocked every token of an address, the one just made
-- included: nine mistyped tokens, then a new token made to fix it, and that new token waited
-- for the window to end. A token made after the address's failures began is now answered
-- while the address is blocked (no guess of that window can have been aimed at it); older
-- tokens and guesses are still refused before anything is said about them. (Only an address
-- over the limit looks a token up in this branch, with the same single call and lock.)

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

-- Down Migration
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

