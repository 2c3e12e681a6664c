-- Up Migration
-- The finance functions that read tenant tables, written so that they also run on a database
-- sharded by workspace (Citus), and there read one workspace's shard only.
--
-- PL/pgSQL, not SQL: Citus cannot plan a query of a SQL function that reads a distributed table
-- ("parameterized queries for SQL functions referencing distributed tables are not supported"),
-- and plans a PL/pgSQL function's queries with their values bound. Each query names the
-- workspace (the computed field's row's, or the caller's claim), so a sharded database sends it
-- to that workspace's shard; RLS (SECURITY INVOKER) still decides what is summed.

-- Called once per fund of a list: no SET clause (it would cost a settings change per call);
-- every name is qualified instead.
CREATE OR REPLACE FUNCTION public.summary(f public.funds) RETURNS public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
AS $$
DECLARE
  income numeric;
  expenses numeric;
  participants integer;
BEGIN
  SELECT coalesce(pg_catalog.sum(x.amount) FILTER (WHERE x.amount > 0), 0),
         coalesce(-pg_catalog.sum(x.amount) FILTER (WHERE x.amount < 0), 0)
    INTO income, expenses
    FROM public.fund_transactions x
   WHERE x.workspace_id = f.workspace_id AND x.fund_id = f.id;
  SELECT pg_catalog.count(*)::integer INTO participants
    FROM public.fund_participants y
   WHERE y.workspace_id = f.workspace_id AND y.fund_id = f.id;
  RETURN ROW(f.id, income - expenses, income, expenses,
             CASE WHEN f.target_amount > 0 THEN pg_catalog.round((income - expenses) / f.target_amount, 4) END,
             participants)::public.fund_figures;
END
$$;

CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  f public.funds;
BEGIN
  -- Row by row rather than summary(f) in the query: on a shard, f would be of the shard's row type.
  FOR f IN SELECT * FROM public.funds x WHERE x.workspace_id = ws LOOP
    RETURN NEXT public.summary(f);
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  f public.funds;
BEGIN
  SELECT * INTO f FROM public.funds x WHERE x.workspace_id = ws AND x.id = fund_summary.fund_id;
  IF NOT FOUND THEN
    RETURN NULL; -- all fields null: a fund the caller cannot see
  END IF;
  RETURN public.summary(f);
END
$$;

CREATE OR REPLACE FUNCTION public.spending_summary(from_date date DEFAULT NULL, to_date date DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
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

-- Down Migration
-- The SQL definitions of 051 and 070.
CREATE OR REPLACE FUNCTION public.summary(f public.funds) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
AS $$
  SELECT ROW(f.id,
             t.income - t.expenses,
             t.income,
             t.expenses,
             CASE WHEN f.target_amount > 0 THEN round((t.income - t.expenses) / f.target_amount, 4) END,
             p.n)::public.fund_figures
    FROM (SELECT coalesce(sum(x.amount) FILTER (WHERE x.amount > 0), 0) AS income,
                 coalesce(-sum(x.amount) FILTER (WHERE x.amount < 0), 0) AS expenses
            FROM public.fund_transactions x
           WHERE x.workspace_id = f.workspace_id AND x.fund_id = f.id) t,
         (SELECT count(*)::integer AS n FROM public.fund_participants y
           WHERE y.workspace_id = f.workspace_id AND y.fund_id = f.id) p
$$;
CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT s.* FROM public.funds f CROSS JOIN LATERAL public.summary(f) s $$;
CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT s.* FROM public.funds f CROSS JOIN LATERAL public.summary(f) s WHERE f.id = fund_summary.fund_id $$;
CREATE OR REPLACE FUNCTION public.spending_summary(from_date date DEFAULT NULL, to_date date DEFAULT NULL) RETURNS jsonb
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$
  WITH e AS (
    SELECT x.amount, x.category_id, x.method_id,
           to_char(x.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month
      FROM public.personal_transactions x
     WHERE (from_date IS NULL OR x.occurred_at >= from_date::timestamp AT TIME ZONE 'UTC')
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
  )
$$;
