-- The rate-limit counters of tally.rate_limits, for the server's login (authenticator): see
-- login.sql for why these are SECURITY DEFINER with pg_temp last in their search_path.

-- n hits at once: an atomic upsert that starts a new window when the old one has ended, and
-- returns the hits of the window after adding n, and when it ends. A low limit takes one hit
-- per request (counted exactly across processes); a high one takes blocks that a Tally process
-- hands out itself (gateway/auth/ratelimit.ts leases), so a request does not pay a round trip
-- of its own for the counter. Now and then it sweeps long-ended windows, so the table stays as
-- small as the set of recently active clients.
CREATE OR REPLACE FUNCTION tally.rate_limit_take(client_key text, window_ms integer, n integer)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
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

-- A call that does the work of many requests (an MCP batch) is charged for all of them at once,
-- and only when they fit: refused, it takes nothing, so the client can send a smaller batch in
-- the same window. tally.rate_limit_take adds first and lets the caller compare afterwards,
-- which is right for one request (it is counted even when refused) but would use up the window
-- for a batch that is never run.
CREATE OR REPLACE FUNCTION tally.rate_limit_take_if_fits(client_key text, window_ms integer, n integer, max_hits integer)
RETURNS TABLE (hits integer, reset_at timestamptz, taken boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  t timestamptz := clock_timestamp();
  w interval := make_interval(secs => window_ms / 1000.0);
BEGIN
  IF n < 1 THEN
    RAISE EXCEPTION 'n must be at least 1';
  END IF;
  IF n <= max_hits THEN
    -- The update's WHERE is checked on the locked row: two batches at once cannot both fit
    -- into the room for one.
    RETURN QUERY
      INSERT INTO rate_limits AS r (key, hits, reset_at) VALUES (client_key, n, t + w)
      ON CONFLICT (key) DO UPDATE
        SET hits = CASE WHEN r.reset_at <= t THEN n ELSE r.hits + n END,
            reset_at = CASE WHEN r.reset_at <= t THEN t + w ELSE r.reset_at END
        WHERE r.reset_at <= t OR r.hits + n <= max_hits
      RETURNING r.hits, r.reset_at, true;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  RETURN QUERY
    SELECT r.hits, r.reset_at, false FROM rate_limits r WHERE r.key = client_key AND r.reset_at > t
    UNION ALL
    SELECT 0, t + w, false WHERE NOT EXISTS (SELECT 1 FROM rate_limits r WHERE r.key = client_key AND r.reset_at > t)
    LIMIT 1;
END
$$;

-- Takes back a hit of the current window (express-rate-limit's skip of successful requests).
CREATE OR REPLACE FUNCTION tally.rate_limit_undo(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
  UPDATE rate_limits SET hits = greatest(hits - 1, 0)
   WHERE key = client_key AND reset_at > clock_timestamp()
$$;

CREATE OR REPLACE FUNCTION tally.rate_limit_reset(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$ DELETE FROM rate_limits WHERE key = client_key $$;

CREATE OR REPLACE FUNCTION tally.rate_limit_get(client_key text)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$ SELECT r.hits, r.reset_at FROM rate_limits r WHERE r.key = client_key AND r.reset_at > clock_timestamp() $$;

REVOKE EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer),
  tally.rate_limit_take_if_fits(text, integer, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer),
  tally.rate_limit_take_if_fits(text, integer, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) TO authenticator;
