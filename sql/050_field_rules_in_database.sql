-- Up Migration
-- Rules of the interface that every surface must give the same answer to, enforced where all of
-- them meet: the database. /api/v1 and MCP check them first for friendlier messages; /rest/v1
-- (PostgREST's grammar, no per-table code) relies on these alone.
--
-- 1. An unknown or wrong-list category_id, or an unknown method_id, is a 400 naming the field and
--    the allowed values: a check_violation (23514, a 400 as in PostgREST) raised by a BEFORE
--    trigger, so it comes before the foreign key (whose 23503 would be a 409 conflict).
-- 2. occurred_at is a finite instant: 'infinity' would sort first on every surface forever.
--    NOT VALID: rows already stored are the operator's to fix; every new write is checked.
-- 3. A contact's gender and nationality are set on create only: api_write may update the other
--    columns, not these (column privileges; an UPDATE naming them is a 42501).
CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
  allowed text;
BEGIN
  IF NEW.category_id IS NOT NULL THEN
    SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
      FROM categories WHERE id = NEW.category_id;
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
  IF NEW.method_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM payment_methods WHERE id = NEW.method_id) THEN
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

DROP TRIGGER personal_transactions_category_domain ON public.personal_transactions;
DROP TRIGGER fund_transactions_category_domain ON public.fund_transactions;
CREATE TRIGGER personal_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id, method_id ON public.personal_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('expenses');
CREATE TRIGGER fund_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id, method_id ON public.fund_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('funds');

ALTER TABLE public.personal_transactions
  ADD CONSTRAINT personal_transactions_occurred_at_finite CHECK (isfinite(occurred_at)) NOT VALID;
ALTER TABLE public.fund_transactions
  ADD CONSTRAINT fund_transactions_occurred_at_finite CHECK (isfinite(occurred_at)) NOT VALID;

REVOKE UPDATE ON public.contacts FROM api_write;
GRANT UPDATE (workspace_id, id, name, nickname, phone, email, created_at) ON public.contacts TO api_write;

-- Down Migration
REVOKE UPDATE (workspace_id, id, name, nickname, phone, email, created_at) ON public.contacts FROM api_write;
GRANT UPDATE ON public.contacts TO api_write;
ALTER TABLE public.fund_transactions DROP CONSTRAINT IF EXISTS fund_transactions_occurred_at_finite;
ALTER TABLE public.personal_transactions DROP CONSTRAINT IF EXISTS personal_transactions_occurred_at_finite;
DROP TRIGGER personal_transactions_category_domain ON public.personal_transactions;
DROP TRIGGER fund_transactions_category_domain ON public.fund_transactions;
CREATE TRIGGER personal_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id ON public.personal_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('expenses');
CREATE TRIGGER fund_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id ON public.fund_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('funds');
CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
BEGIN
  IF NEW.category_id IS NULL THEN
    RETURN NEW;
  END IF;
  SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
    FROM categories WHERE id = NEW.category_id;
  IF offered IS NULL THEN
    RAISE foreign_key_violation USING
      MESSAGE = format('category_id "%s" is not a known category', NEW.category_id),
      DETAIL = format('Key (category_id)=(%s) is not present in table "categories".', NEW.category_id),
      COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
  ELSIF NOT offered THEN
    RAISE foreign_key_violation USING
      MESSAGE = format('category_id "%s" is not offered to %s', NEW.category_id, domain),
      DETAIL = format('Key (category_id)=(%s) is not a category of %s.', NEW.category_id, domain),
      HINT = format('Read the categories with for_%s = true', domain),
      COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
  END IF;
  RETURN NEW;
END
$$;
