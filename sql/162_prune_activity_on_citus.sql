-- Up Migration
-- The retention sweep as one DELETE: a data-modifying WITH over the activity log, which Citus
-- distributes, has no distributed plan ("could not create distributed plan"); a DELETE across
-- the shards has, and GET DIAGNOSTICS counts it on both.
CREATE OR REPLACE FUNCTION tally.prune_activity(days integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  gone bigint;
BEGIN
  DELETE FROM public.activity WHERE at < now() - make_interval(days => greatest(days, 1));
  GET DIAGNOSTICS gone = ROW_COUNT;
  RETURN gone;
END
$$;

-- Down Migration
CREATE OR REPLACE FUNCTION tally.prune_activity(days integer) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH gone AS (DELETE FROM public.activity WHERE at < now() - make_interval(days => greatest(days, 1)) RETURNING 1)
  SELECT count(*) FROM gone
$$;
