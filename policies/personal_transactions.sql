-- Row-level security for public.personal_transactions: a request sees and writes only rows of the workspace
-- named by its JWT claim. tally.workspace_isolation (sql/107_citus_placement.sql) writes the
-- policy, in the form plain Postgres and a Citus coordinator each accept, with RLS forced.
-- Idempotent: `tally policies apply` re-runs it.
SELECT tally.workspace_isolation('public.personal_transactions');
