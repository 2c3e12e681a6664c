-- Row-level security for tally.workspace_usage (sql/app/migrations/171_workspace_budgets.sql):
-- the write role reads and counts the row of the workspace named by its JWT claim, and no
-- other, through the functions that count a request's entries and stored answers. Schema tally
-- is exposed by no surface. The owner keeps every row, for the sweeps that prune and subtract
-- (they run as the owner, which forced RLS holds to its own policy). The policies have no
-- subquery: Citus accepts them on a distributed table as they are.
-- Idempotent: `tally policies apply` re-runs it.
ALTER TABLE tally.workspace_usage ENABLE ROW LEVEL SECURITY;
ALTER TABLE tally.workspace_usage FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS workspace_usage_of_the_workspace ON tally.workspace_usage;
CREATE POLICY workspace_usage_of_the_workspace ON tally.workspace_usage FOR ALL TO api_write
  USING (workspace_id = tally.current_workspace_id()) WITH CHECK (workspace_id = tally.current_workspace_id());
DROP POLICY IF EXISTS workspace_usage_kept_by_owner ON tally.workspace_usage;
CREATE POLICY workspace_usage_kept_by_owner ON tally.workspace_usage FOR ALL TO CURRENT_USER
  USING (true) WITH CHECK (true);
