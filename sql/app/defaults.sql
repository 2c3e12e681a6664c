-- The functions the tables' column defaults call. `tally migrate` applies this file before the
-- app's migrations (with check_function_bodies off: the workspaces table it reads may not exist
-- yet), and again whenever its text changes, like every definition file.

-- The workspace of the request; NULL without a JWT, so that RLS lets no row through. The
-- default of every tenant table's workspace_id: a client never sends it and cannot choose another
-- (the RLS policies in policies/ refuse any other value).
CREATE OR REPLACE FUNCTION tally.current_workspace_id() RETURNS uuid
LANGUAGE sql STABLE
AS $$ SELECT nullif(tally.jwt_claims() ->> 'workspace_id', '')::uuid $$;
REVOKE EXECUTE ON FUNCTION tally.current_workspace_id() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.current_workspace_id() TO anon, api_read, api_write;

-- The workspace's currency, for the default of funds.currency. SECURITY DEFINER because the
-- API roles cannot read public.workspaces.
CREATE OR REPLACE FUNCTION tally.current_workspace_currency() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT coalesce((SELECT currency FROM workspaces WHERE id = tally.current_workspace_id()), 'USD') $$;
REVOKE EXECUTE ON FUNCTION tally.current_workspace_currency() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.current_workspace_currency() TO api_read, api_write;
