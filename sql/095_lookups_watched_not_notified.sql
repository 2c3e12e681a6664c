-- Up Migration
-- The lookup lists reach every Tally process through tally.change_version(), which fingerprints
-- the tables listed in tally.watched_relations: no trigger on the lookup tables. Their NOTIFY
-- triggers went: Citus refuses NOTIFY inside its two-phase commit and triggers on reference tables,
-- and PgBouncer in transaction mode never delivered the notices.
DROP TRIGGER IF EXISTS categories_changed ON public.categories;
DROP TRIGGER IF EXISTS payment_methods_changed ON public.payment_methods;
DROP TRIGGER IF EXISTS fund_kinds_changed ON public.fund_kinds;
DROP FUNCTION IF EXISTS tally.notify_lookup_change();

INSERT INTO tally.watched_relations (relation)
VALUES ('public.categories'), ('public.payment_methods'), ('public.fund_kinds')
ON CONFLICT DO NOTHING;

-- Down Migration
DELETE FROM tally.watched_relations
 WHERE relation IN ('public.categories'::regclass, 'public.payment_methods'::regclass, 'public.fund_kinds'::regclass);

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
