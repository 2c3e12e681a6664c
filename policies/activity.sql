-- Row-level security for public.activity: a request reads only the activity of the workspace
-- named by its JWT claim. Only the owner writes it, through the trigger that records changes and
-- the retention sweep (sql/161_activity.sql; both functions run as the owner, which forced RLS
-- holds to its own policy); the API roles have no privilege to write it at all.
-- The policies have no subquery: Citus accepts them on a distributed table as they are.
-- Idempotent: `tally policies apply` re-runs it.
ALTER TABLE public.activity ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.activity FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS activity_of_the_workspace ON public.activity;
CREATE POLICY activity_of_the_workspace ON public.activity FOR SELECT TO anon, api_read, api_write
  USING (workspace_id = tally.current_workspace_id());
DROP POLICY IF EXISTS activity_kept_by_owner ON public.activity;
CREATE POLICY activity_kept_by_owner ON public.activity FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
