-- Up Migration
-- A fund's figures defined once, over the fund's row, and in linear time.
--
-- Before, funds.summary called fund_summary(id), which filtered fund_summaries(), which
-- computed every fund the caller can see: a list of n funds cost n². Now the one definition
-- is the computed field summary(funds), which reads only that fund's transactions and
-- participants (index probes on (workspace_id, fund_id)); fund_summaries() and fund_summary(id)
-- apply it to the funds they answer, and balance(funds) is its balance.
--
-- SECURITY INVOKER, as before: the caller's RLS decides what is summed. No SET search_path
-- (which keeps Postgres from inlining a SQL function): every name is schema-qualified instead.

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
COMMENT ON FUNCTION public.summary(public.funds) IS 'A fund''s balance, income, expenses, progress to target and participant count';

CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT s.* FROM public.funds f CROSS JOIN LATERAL public.summary(f) s $$;

CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT s.* FROM public.funds f CROSS JOIN LATERAL public.summary(f) s WHERE f.id = fund_summary.fund_id $$;

-- The balance is the summary's: one definition of what a fund holds.
CREATE OR REPLACE FUNCTION public.balance(f public.funds) RETURNS numeric
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT (public.summary(f)).balance $$;

-- Down Migration
-- (The parameter keeps its name f: a replaced function cannot drop it.)
CREATE OR REPLACE FUNCTION public.balance(f public.funds) RETURNS numeric
LANGUAGE sql STABLE
AS $$
  SELECT coalesce(sum(t.amount), 0) FROM public.fund_transactions t
   WHERE t.workspace_id = f.workspace_id AND t.fund_id = f.id
$$;
CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$
  SELECT f.id,
         t.income - t.expenses,
         t.income,
         t.expenses,
         CASE WHEN f.target_amount > 0 THEN round((t.income - t.expenses) / f.target_amount, 4) END,
         p.n
    FROM public.funds f
   CROSS JOIN LATERAL (
         SELECT coalesce(sum(x.amount) FILTER (WHERE x.amount > 0), 0) AS income,
                coalesce(-sum(x.amount) FILTER (WHERE x.amount < 0), 0) AS expenses
           FROM public.fund_transactions x
          WHERE x.workspace_id = f.workspace_id AND x.fund_id = f.id) t
   CROSS JOIN LATERAL (
         SELECT count(*)::integer AS n FROM public.fund_participants y
          WHERE y.workspace_id = f.workspace_id AND y.fund_id = f.id) p
$$;
CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$ SELECT s.* FROM public.fund_summaries() s WHERE s.fund_id = fund_summary.fund_id $$;
CREATE OR REPLACE FUNCTION public.summary(f public.funds) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$ SELECT public.fund_summary(f.id) $$;
