-- A fund's figures, computed in one place for every surface: the /rest/v1/rpc endpoints, the
-- /api/v1 wrapper's GET /funds/{id} and the MCP tools list_funds and get_fund. A fund's balance
-- is never stored: it is the sum of its transactions, computed on read. The composite type
-- public.fund_figures is the baseline migration's.
--
-- A fund's figures are its income (the sum of its positive amounts), its expenses (of its
-- negative amounts, as a positive number), its balance (income less expenses), its progress
-- (balance over target, to 4 places, without a target above 0 none) and its participant count.
-- They are computed two ways, by what is asked for (tests/fund-figures.test.ts holds every way to
-- one plain aggregate):
--
-- - the figures of every fund of the workspace (fund_summaries()): one statement, whatever the
--   number of funds, the transactions and participants of the workspace summed by fund
--   (GROUP BY) and joined to its funds. On Citus the three tables are colocated and each is
--   read by the workspace, so the statement runs on that workspace's shard, once;
-- - the figures of one fund (fund_summary(id), the computed fields summary and balance), its
--   transactions and participants read by (workspace_id, fund_id). A computed field (PostgREST
--   style: select=name,summary) is a function of one row, which Postgres calls for each row it
--   answers, and which runs its statements each time: the figures of a long list of funds are
--   rpc/fund_summaries (MCP list_funds reads them so).
--
-- SECURITY INVOKER: the caller's RLS decides which funds, transactions and participants are
-- summed, so workspace A never sees B's figures. PL/pgSQL, not SQL: Citus cannot plan a query of
-- a SQL function that reads a distributed table, and plans a PL/pgSQL function's queries with
-- their values bound. Each query names the workspace (the row's, or the caller's claim), so a
-- sharded database sends it to that workspace's shard.

-- One fund's figures (a function of its row, called once per row): it reads only that fund's
-- transactions and participants (index probes on (workspace_id, fund_id)), in two statements of
-- one table each, which Citus plans on its fast path (a statement that joins two of its tables
-- takes its full planner, at several times the cost, once per row). No SET clause (it would cost
-- a settings change per call); every name is qualified instead.
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

-- One row per fund the caller can see, in one statement (see the top of this file).
CREATE OR REPLACE FUNCTION public.fund_summaries() RETURNS SETOF public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
BEGIN
  RETURN QUERY
    SELECT f.id, coalesce(t.income, 0) - coalesce(t.expenses, 0), coalesce(t.income, 0), coalesce(t.expenses, 0),
           CASE WHEN f.target_amount > 0
                THEN round((coalesce(t.income, 0) - coalesce(t.expenses, 0)) / f.target_amount, 4) END,
           coalesce(p.n, 0)::integer
      FROM public.funds f
      LEFT JOIN (SELECT x.fund_id, sum(x.amount) FILTER (WHERE x.amount > 0) AS income,
                        -sum(x.amount) FILTER (WHERE x.amount < 0) AS expenses
                   FROM public.fund_transactions x
                  WHERE x.workspace_id = ws
                  GROUP BY x.fund_id) t ON t.fund_id = f.id
      LEFT JOIN (SELECT y.fund_id, count(*) AS n
                   FROM public.fund_participants y
                  WHERE y.workspace_id = ws
                  GROUP BY y.fund_id) p ON p.fund_id = f.id
     WHERE f.workspace_id = ws;
END
$$;
COMMENT ON FUNCTION public.fund_summaries() IS 'The figures of every fund of the workspace';

-- One fund's figures: a single row (a JSON object over /rpc); all fields null when the caller
-- cannot see the fund. One statement: the fund, its transactions and its participants.
CREATE OR REPLACE FUNCTION public.fund_summary(fund_id uuid) RETURNS public.fund_figures
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  figures public.fund_figures;
BEGIN
  SELECT f.id, t.income - t.expenses, t.income, t.expenses,
         CASE WHEN f.target_amount > 0 THEN round((t.income - t.expenses) / f.target_amount, 4) END, p.n
    INTO figures
    FROM public.funds f,
         (SELECT coalesce(sum(x.amount) FILTER (WHERE x.amount > 0), 0) AS income,
                 coalesce(-sum(x.amount) FILTER (WHERE x.amount < 0), 0) AS expenses
            FROM public.fund_transactions x
           WHERE x.workspace_id = ws AND x.fund_id = fund_summary.fund_id) t,
         (SELECT count(*)::integer AS n
            FROM public.fund_participants y
           WHERE y.workspace_id = ws AND y.fund_id = fund_summary.fund_id) p
   WHERE f.workspace_id = ws AND f.id = fund_summary.fund_id;
  RETURN figures; -- NULL, all fields null: a fund the caller cannot see
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
