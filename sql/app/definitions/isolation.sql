-- The row-level security of a tenant table, which each file of policies/ applies to its table.

-- A Citus coordinator with at least one worker: where tables are distributed, and where a
-- policy may not hold a sub-select.
CREATE OR REPLACE FUNCTION tally.citus_coordinator() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    RETURN false;
  END IF;
  RETURN citus_is_coordinator()
     AND EXISTS (SELECT 1 FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive);
END
$$;

-- A request sees and writes only the rows of the workspace named by its JWT claim
-- (tally.current_workspace_id(), NULL without a JWT: no rows at all); FORCE makes the table owner
-- obey it too. On plain Postgres the claim is read in a sub-select, which Postgres evaluates
-- once per statement instead of once per row; Citus refuses sub-selects in the policies of
-- distributed tables, so there it is the plain call. Drops and re-creates, so running it again
-- changes nothing.
CREATE OR REPLACE FUNCTION tally.workspace_isolation(rel regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claim text := CASE WHEN tally.citus_coordinator() THEN 'tally.current_workspace_id()'
                     ELSE '(SELECT tally.current_workspace_id())' END;
BEGIN
  EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', rel);
  EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', rel);
  EXECUTE format('DROP POLICY IF EXISTS workspace_isolation ON %s', rel);
  EXECUTE format('CREATE POLICY workspace_isolation ON %s FOR ALL TO anon, api_read, api_write '
                 'USING (workspace_id = %s) WITH CHECK (workspace_id = %s)', rel, claim, claim);
END
$$;

REVOKE EXECUTE ON FUNCTION tally.citus_coordinator(), tally.workspace_isolation(regclass) FROM PUBLIC;
