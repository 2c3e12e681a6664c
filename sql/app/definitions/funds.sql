-- A fund's figures, computed in one place for every surface: the /rest/v1/rpc endpoints, the
-- /api/v1 wrapper's GET /funds/{id} and the MCP tools list_funds and get_fund. A fund's balance
-- is never stored: it is the sum of its transactions, computed on read.
--
-- The one definition is the computed field summary(funds) (PostgREST style: select=name,summary),
-- which reads only that fund's transactions and participants (index probes on (workspace_id,
-- fund_id)); fund_summaries() and fund_summary(id) apply it to the funds they answer, row by
-- row, and balance(funds) is its balance. The composite type public.fund_figures is the
-- baseline migration's.
--
-- SECURITY INVOKER: the caller's RLS decides which funds, transactions and participants are
-- summed, so workspace A never sees B's figures. PL/pgSQL, not SQL: Citus cannot plan a query of
-- a SQL function that reads a distributed table, and plans a PL/pgSQL function's queries with
-- their values bound. Each query names the workspace (the row's, or the caller's claim), so a
-- sharded database sends it to that workspace's shard.

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
COMMENT ON FUNCTION public.summary(public.funds) IS 'A fund''s balance, income, expenses, progress to target and participant count';

-- One row per fund the caller can see.
CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
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
COMMENT ON FUNCTION public.fund_summaries() IS 'The figures of every fund of the workspace';

-- One fund's figures: a single row (a JSON object over /rpc); all fields null when the caller
-- cannot see the fund.
CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
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
COMMENT ON FUNCTION public.fund_summary(uuid) IS 'The figures of one fund: balance, income, expenses, progress to target, participant count';

-- The balance is the summary's: one definition of what a fund holds. (A SQL function: its body
-- is checked when it is created, so it comes after summary.)
CREATE OR REPLACE FUNCTION public.balance(f public.funds) RETURNS numeric
LANGUAGE sql STABLE SECURITY INVOKER
AS $$ SELECT (public.summary(f)).balance $$;

REVOKE EXECUTE ON FUNCTION public.summary(public.funds), public.fund_summaries(), public.fund_summary(uuid),
  public.balance(public.funds) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.summary(public.funds), public.fund_summaries(), public.fund_summary(uuid),
  public.balance(public.funds) TO api_read;
