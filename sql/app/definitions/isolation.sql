-- The row-level security of a tenant table, which each file of policies/ applies to its table.

-- A request sees and writes only the rows of the workspace named by its JWT claim
-- (tally.current_workspace_id(), NULL without a JWT: no rows at all); FORCE makes the table owner
-- obey it too. On plain Postgres the claim is read in a sub-select, which Postgres evaluates
-- once per statement instead of once per row; Citus refuses sub-selects in the policies of
-- distributed tables, so on a Citus coordinator it is the plain call. Drops and re-creates, so
-- running it again changes nothing.
CREATE OR REPLACE FUNCTION tally.workspace_isolation(rel regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claim text := '(SELECT tally.current_workspace_id())';
BEGIN
  -- A database with the citus extension has sql/extensions/citus/'s functions (PL/pgSQL looks a
  -- name up when it first runs the statement: on plain Postgres this one is never reached).
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    IF tally.citus_coordinator() THEN
      claim := 'tally.current_workspace_id()';
    END IF;
  END IF;
  EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', rel);
  EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', rel);
  EXECUTE format('DROP POLICY IF EXISTS workspace_isolation ON %s', rel);
  EXECUTE format('CREATE POLICY workspace_isolation ON %s FOR ALL TO anon, api_read, api_write '
                 'USING (workspace_id = %s) WITH CHECK (workspace_id = %s)', rel, claim, claim);
END
$$;

REVOKE EXECUTE ON FUNCTION tally.workspace_isolation(regclass) FROM PUBLIC;
