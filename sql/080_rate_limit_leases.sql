-- Up Migration
-- A block of rate-limit hits at once (gateway/auth/ratelimit.ts leases): with a high limit a
-- Tally process takes n hits in one round trip and hands them out itself, so a request no
-- longer pays a Postgres round trip of its own for the counter. Same window rules as
-- tally.rate_limit_hit; returns the hits of the window after adding n, and when it ends.
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
  RETURN QUERY
    INSERT INTO rate_limits AS r (key, hits, reset_at) VALUES (client_key, n, t + w)
    ON CONFLICT (key) DO UPDATE
      SET hits = CASE WHEN r.reset_at <= t THEN n ELSE r.hits + n END,
          reset_at = CASE WHEN r.reset_at <= t THEN t + w ELSE r.reset_at END
    RETURNING r.hits, r.reset_at;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.rate_limit_take(text, integer, integer);
