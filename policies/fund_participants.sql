-- Row-level security for public.fund_participants: a request sees and writes only rows of the workspace
-- named by its JWT claim (tally.current_workspace_id(), NULL without a JWT: no rows at all).
-- FORCE makes the table owner obey it too. Idempotent: `tally policies apply` re-runs it.
-- The function is wrapped in a sub-select so Postgres evaluates it once per statement.
ALTER TABLE public.fund_participants ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.fund_participants FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS workspace_isolation ON public.fund_participants;
CREATE POLICY workspace_isolation ON public.fund_participants
  FOR ALL TO anon, api_read, api_write
  USING (workspace_id = (SELECT tally.current_workspace_id()))
  WITH CHECK (workspace_id = (SELECT tally.current_workspace_id()));
