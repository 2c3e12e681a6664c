-- Up Migration
-- Categories, payment methods and fund kinds grow without a release (a DBA inserts a row). Every
-- Tally process caches the lists briefly for its schemas (wrapper validation, OpenAPI, MCP tool
-- schemas); a change notifies them on channel tally_lookups, so a new row is accepted at once.
CREATE FUNCTION tally.notify_lookup_change() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  PERFORM pg_notify('tally_lookups', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TRIGGER categories_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON public.categories
  FOR EACH STATEMENT EXECUTE FUNCTION tally.notify_lookup_change();
CREATE TRIGGER payment_methods_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON public.payment_methods
  FOR EACH STATEMENT EXECUTE FUNCTION tally.notify_lookup_change();
CREATE TRIGGER fund_kinds_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON public.fund_kinds
  FOR EACH STATEMENT EXECUTE FUNCTION tally.notify_lookup_change();

-- Down Migration
DROP TRIGGER IF EXISTS categories_changed ON public.categories;
DROP TRIGGER IF EXISTS payment_methods_changed ON public.payment_methods;
DROP TRIGGER IF EXISTS fund_kinds_changed ON public.fund_kinds;
DROP FUNCTION IF EXISTS tally.notify_lookup_change();
