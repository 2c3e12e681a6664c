-- Run once on a database migrated by the pre-release history (which migrations/000_baseline.sql
-- squashed), when `tally migrate` replaces that history's recorded names by the baseline's
-- (gateway/db/squashed.ts), in the same transaction. Such a database holds what a fresh one
-- does, but for what this file changes.
--
-- 1. Constraints added NOT VALID to tables that had rows are validated: the baseline declares
--    them valid. A row that breaks one stops this migration, naming the constraint: fix the row.
-- 2. Functions no file defines any more are dropped: tally.bound_shard (the Citus shard names
--    are views now, sql/extensions/citus/definitions/shards.sql), and on a database without the
--    citus extension the functions of sql/extensions/citus/, which only such a database gets.
ALTER TABLE public.personal_transactions VALIDATE CONSTRAINT personal_transactions_occurred_at_finite;
ALTER TABLE public.fund_transactions VALIDATE CONSTRAINT fund_transactions_occurred_at_finite;
ALTER TABLE public.funds VALIDATE CONSTRAINT funds_target_amount_bounds;
ALTER TABLE public.funds VALIDATE CONSTRAINT funds_contribution_amount_bounds;
ALTER TABLE public.funds VALIDATE CONSTRAINT funds_start_date_finite;
ALTER TABLE public.funds VALIDATE CONSTRAINT funds_end_date_finite;
ALTER TABLE public.contacts VALIDATE CONSTRAINT contacts_email_format;

DROP FUNCTION IF EXISTS tally.bound_shard(text);
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    DROP FUNCTION IF EXISTS tally.place_tables(), tally.tenant_tables(), tally.citus_coordinator(), tally.citus_api_roles(),
      tally.citus_role_secret(text), tally.bind_shards();
  END IF;
END
$$;
