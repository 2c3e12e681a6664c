-- Two read functions for agents (the MCP tools get_workspace and spending_summary), callable by
-- any surface over /rpc like fund_summary.

-- The caller's workspace: its name and currency. SECURITY DEFINER because the API roles cannot
-- read public.workspaces; it answers only the row of the workspace claim of the caller's token.
CREATE OR REPLACE FUNCTION public.workspace_profile() RETURNS TABLE (name text, currency text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT w.name, w.currency FROM public.workspaces w WHERE w.id = tally.current_workspace_id() $$;
COMMENT ON FUNCTION public.workspace_profile() IS 'The name and currency of the workspace of the token';

-- Personal expenses between two dates (whole UTC days, both included; null = unbounded), summed
-- by category, by payment method and by month (YYYY-MM, UTC), largest first. SECURITY INVOKER:
-- the caller's RLS decides which expenses are summed. PL/pgSQL, naming the caller's workspace,
-- for the reason funds.sql gives.
CREATE OR REPLACE FUNCTION public.spending_summary(from_date date DEFAULT NULL, to_date date DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  result jsonb;
BEGIN
  WITH e AS (
    SELECT x.amount, x.category_id, x.method_id,
           to_char(x.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month
      FROM public.personal_transactions x
     WHERE x.workspace_id = ws
       AND (from_date IS NULL OR x.occurred_at >= from_date::timestamp AT TIME ZONE 'UTC')
       AND (to_date IS NULL OR x.occurred_at < (to_date + 1)::timestamp AT TIME ZONE 'UTC')
  )
  SELECT jsonb_build_object(
    'from_date', from_date,
    'to_date', to_date,
    'total', (SELECT coalesce(sum(amount), 0) FROM e),
    'count', (SELECT count(*) FROM e),
    'by_category', (SELECT coalesce(jsonb_agg(jsonb_build_object('category_id', k, 'total', t, 'count', n) ORDER BY t DESC, k), '[]')
                      FROM (SELECT category_id AS k, sum(amount) AS t, count(*) AS n FROM e GROUP BY 1) g),
    'by_method', (SELECT coalesce(jsonb_agg(jsonb_build_object('method_id', k, 'total', t, 'count', n) ORDER BY t DESC, k), '[]')
                    FROM (SELECT method_id AS k, sum(amount) AS t, count(*) AS n FROM e GROUP BY 1) g),
    'by_month', (SELECT coalesce(jsonb_agg(jsonb_build_object('month', k, 'total', t, 'count', n) ORDER BY k), '[]')
                   FROM (SELECT month AS k, sum(amount) AS t, count(*) AS n FROM e GROUP BY 1) g)
  ) INTO result;
  RETURN result;
END
$$;
COMMENT ON FUNCTION public.spending_summary(date, date) IS 'Expenses between two dates (UTC days, inclusive) by category, payment method and month';

REVOKE EXECUTE ON FUNCTION public.workspace_profile(), public.spending_summary(date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.workspace_profile(), public.spending_summary(date, date) TO api_read;
