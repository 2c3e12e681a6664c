-- Up Migration
-- A call that does the work of many requests (an MCP batch) is charged for all of them at once,
-- and only when they fit: refused, it takes nothing, so the client can send a smaller batch in
-- the same window. tally.rate_limit_take adds first and lets the caller compare afterwards,
-- which is right for one request (it is counted even when refused) but used up the window for
-- a batch that was never run.
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
REVOKE EXECUTE ON FUNCTION tally.rate_limit_take_if_fits(text, integer, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.rate_limit_take_if_fits(text, integer, integer, integer) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.rate_limit_take_if_fits(text, integer, integer, integer);
