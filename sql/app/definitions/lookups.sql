-- An expense must use a category offered to Expenses, a fund transaction one offered to Funds,
-- and both a known payment method. The foreign keys alone cannot say which list, and answer
-- 23503 (a 409 conflict): this trigger answers first, with a check_violation (23514, a 400 as in
-- PostgREST) that names the field and lists the allowed values, the same on every surface
-- (/api/v1 and MCP check first for friendlier messages; /rest/v1 relies on this alone).
--
-- It reads the lookups by their plain names. On Citus, where the trigger runs on the worker that
-- holds the row, `tally migrate`'s Citus step (sql/extensions/citus/) puts schema tally_shard
-- first in its search_path: there categories and payment_methods name views of the reference
-- tables' shard on that node, so a row that passes is looked up without going through Citus.
CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
  allowed text;
  known boolean;
BEGIN
  -- Both looked up in one statement: every insert runs it.
  SELECT (SELECT CASE domain WHEN 'expenses' THEN c.for_expenses ELSE c.for_funds END
            FROM categories c WHERE c.id = NEW.category_id),
         NEW.method_id IS NULL OR EXISTS (SELECT 1 FROM payment_methods m WHERE m.id = NEW.method_id)
    INTO offered, known;
  IF NEW.category_id IS NOT NULL THEN
    IF offered IS NULL OR NOT offered THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed
        FROM categories WHERE CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END;
      RAISE check_violation USING
        MESSAGE = CASE WHEN offered IS NULL
          THEN format('category_id "%s" is not a known category', NEW.category_id)
          ELSE format('category_id "%s" is not offered to %s', NEW.category_id, domain) END,
        DETAIL = format('category_id must be one of: %s', allowed),
        HINT = format('Read the categories with for_%s = true', domain),
        COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
    END IF;
  END IF;
  IF NOT known THEN
    SELECT string_agg(id, ', ' ORDER BY id) INTO allowed FROM payment_methods;
    RAISE check_violation USING
      MESSAGE = format('method_id "%s" is not a known payment method', NEW.method_id),
      DETAIL = format('method_id must be one of: %s', allowed),
      HINT = 'Read the payment methods',
      COLUMN = 'method_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_method_id_fkey';
  END IF;
  RETURN NEW; -- NOT NULL reports a missing value, naming the column
END
$$;
REVOKE EXECUTE ON FUNCTION tally.check_category_domain() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.check_category_domain() TO api_write;

-- On a distributed table (Citus) the trigger runs on the shard that holds the row; it reads only
-- the row and reference tables, which every node holds, so it is safe there. (A placeholder
-- setting on plain Postgres.)
SET LOCAL citus.enable_unsafe_triggers = on;
DROP TRIGGER IF EXISTS personal_transactions_category_domain ON public.personal_transactions;
CREATE TRIGGER personal_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id, method_id ON public.personal_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('expenses');
DROP TRIGGER IF EXISTS fund_transactions_category_domain ON public.fund_transactions;
CREATE TRIGGER fund_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id, method_id ON public.fund_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('funds');
