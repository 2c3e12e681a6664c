-- Up Migration
-- Access: the token exchange and the rate-limit counters. The server connects as
-- `authenticator`, which has no table privileges (NOINHERIT), so each question it needs
-- answered is a SECURITY DEFINER function granted to authenticator itself, answering exactly
-- that question and nothing more.

-- authenticator is NOINHERIT: the USAGE that the API roles have on schema tally does not
-- reach it, and it needs it to call the functions below.
GRANT USAGE ON SCHEMA tally TO authenticator;

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

-- Rate-limit counters shared by every Tally process on this database: fixed windows, one row
-- per client key (a workspace token's id or a client address, never a secret). UNLOGGED: a
-- counter lost in a crash costs one window of leniency, and the table takes a write per request.
CREATE UNLOGGED TABLE tally.rate_limits (
  key      text PRIMARY KEY CONSTRAINT rate_limits_key_length CHECK (char_length(key) <= 200),
  hits     integer NOT NULL,
  reset_at timestamptz NOT NULL
);
CREATE INDEX rate_limits_reset_idx ON tally.rate_limits (reset_at);

-- n hits at once: an atomic upsert that starts a new window when the old one has ended, and
-- returns the hits of the window after adding n, and when it ends. A low limit takes one hit
-- per request (counted exactly across processes); a high one takes blocks that a Tally process
-- hands out itself (gateway/auth/ratelimit.ts leases), so a request does not pay a round trip
-- of its own for the counter. Now and then it sweeps long-ended windows, so the table stays as
-- small as the set of recently active clients.
CREATE FUNCTION tally.rate_limit_take(client_key text, window_ms integer, n integer)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$
#variable_conflict use_column
DECLARE
  t timestamptz := clock_timestamp();
  w interval := make_interval(secs => window_ms / 1000.0);
BEGIN
  IF n < 1 THEN
    RAISE EXCEPTION 'n must be at least 1';
  END IF;
  IF random() < 0.001 THEN
    DELETE FROM rate_limits r WHERE r.reset_at < t - interval '1 hour';
  END IF;
  RETURN QUERY
    INSERT INTO rate_limits AS r (key, hits, reset_at) VALUES (client_key, n, t + w)
    ON CONFLICT (key) DO UPDATE
      SET hits = CASE WHEN r.reset_at <= t THEN n ELSE r.hits + n END,
          reset_at = CASE WHEN r.reset_at <= t THEN t + w ELSE r.reset_at END
    RETURNING r.hits, r.reset_at;
END
$$;

-- Takes back a hit of the current window (express-rate-limit's skip of successful requests).
CREATE FUNCTION tally.rate_limit_undo(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$
  UPDATE rate_limits SET hits = greatest(hits - 1, 0)
   WHERE key = client_key AND reset_at > clock_timestamp()
$$;

CREATE FUNCTION tally.rate_limit_reset(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$ DELETE FROM rate_limits WHERE key = client_key $$;

CREATE FUNCTION tally.rate_limit_get(client_key text)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$ SELECT r.hits, r.reset_at FROM rate_limits r WHERE r.key = client_key AND r.reset_at > clock_timestamp() $$;

REVOKE EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.rate_limit_get(text), tally.rate_limit_reset(text), tally.rate_limit_undo(text),
  tally.rate_limit_take(text, integer, integer), tally.exchange_token(bytea);
DROP TABLE IF EXISTS tally.rate_limits;
REVOKE USAGE ON SCHEMA tally FROM authenticator;
