-- Up Migration
-- A fund's figures, computed in one place for every surface: the /rest/v1/rpc
-- endpoints, the /api/v1 wrapper's GET /funds/{id} and the MCP tools list_funds and get_fund.
--
-- Shape: a composite type, so that the functions compose over /rpc like a table: fund_summary
-- answers one JSON object, fund_summaries() an array that takes filters, order and ranges
-- (rpc/fund_summaries?progress=gte.0.5&order=balance.desc), and the computed field
-- funds.summary embeds the same row in any read of funds (funds?select=name,summary), so a list
-- of funds with their figures is one statement.
--
-- SECURITY INVOKER (the default, said explicitly): the caller's RLS decides which funds,
-- transactions and participants are summed, so workspace A never sees B's figures.
CREATE TYPE public.fund_figures AS (
  fund_id           uuid,
  balance           numeric,
  income            numeric,
  expenses          numeric,
  progress          numeric,
  participant_count integer
);
COMMENT ON TYPE public.fund_figures IS 'A fund''s balance, income, expenses (a positive number), progress to target (null without target) and participant count';

-- One row per fund the caller can see. progress = balance / target_amount, rounded to 4
-- places; null when the fund has no (or a zero) target.
CREATE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
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
COMMENT ON FUNCTION public.fund_summaries() IS 'The figures of every fund of the workspace';

-- One fund's figures: a single row (a JSON object over /rpc); all fields null when the caller
-- cannot see the fund.
CREATE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$ SELECT s.* FROM public.fund_summaries() s WHERE s.fund_id = fund_summary.fund_id $$;
COMMENT ON FUNCTION public.fund_summary(uuid) IS 'The figures of one fund: balance, income, expenses, progress to target, participant count';

-- The same figures as a computed field of funds (PostgREST style): select=name,summary.
CREATE FUNCTION public.summary(public.funds) RETURNS public.fund_figures
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public
AS $$ SELECT public.fund_summary($1.id) $$;

REVOKE EXECUTE ON FUNCTION public.fund_summaries(), public.fund_summary(uuid), public.summary(public.funds) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.fund_summaries(), public.fund_summary(uuid), public.summary(public.funds) TO api_read;

-- Down Migration
DROP FUNCTION IF EXISTS public.summary(public.funds);
DROP FUNCTION IF EXISTS public.fund_summary(uuid);
DROP FUNCTION IF EXISTS public.fund_summaries();
DROP TYPE IF EXISTS public.fund_figures;
