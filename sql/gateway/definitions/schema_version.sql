-- What every Tally process polls to know that its caches are stale: one cheap statement that works
-- through any pooler (PgBouncer in transaction mode drops LISTEN's notices) and on a Citus
-- coordinator (whose two-phase commit refuses NOTIFY, and whose reference tables should carry no
-- triggers). tally.change_version() is the schema version (tally.schema_version_row), moved by an
-- event trigger after every DDL command (GRANT and REVOKE included), followed by a fingerprint of
-- the contents of the small tables listed in tally.watched_relations (an app's lookup lists). The
-- server reloads its schema cache and its lists when the value differs from the one it last saw.

-- What a DBA runs after a schema change when no event trigger could be made (no superuser), and
-- what `tally migrate` runs after every run. The version moves for every server when the
-- transaction commits.
CREATE OR REPLACE FUNCTION tally.schema_changed() RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$ UPDATE tally.schema_version_row SET version = version + 1 $$;
REVOKE EXECUTE ON FUNCTION tally.schema_changed() FROM PUBLIC;

CREATE OR REPLACE FUNCTION tally.bump_schema_version() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
BEGIN
  PERFORM tally.schema_changed();
END
$$;
REVOKE EXECUTE ON FUNCTION tally.bump_schema_version() FROM PUBLIC;

-- Event triggers need a superuser. Without one, schema changes reach running servers through
-- `tally migrate` (which calls tally.schema_changed() itself) or NOTIFY pgrst where LISTEN
-- works; the README says so.
DO $$
BEGIN
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    DROP EVENT TRIGGER IF EXISTS tally_schema_changed;
    CREATE EVENT TRIGGER tally_schema_changed ON ddl_command_end
      EXECUTE FUNCTION tally.bump_schema_version();
  ELSE
    RAISE NOTICE 'not a superuser: no event trigger for schema changes (run tally migrate, or NOTIFY pgrst, after a schema change)';
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION tally.change_version() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
DECLARE
  version text;
  rel regclass;
  rows_hash text;
BEGIN
  SELECT v.version::text INTO version FROM tally.schema_version_row v;
  -- A dropped table leaves its oid behind in watched_relations: only tables that exist count.
  FOR rel IN SELECT w.relation FROM watched_relations w JOIN pg_class c ON c.oid = w.relation ORDER BY c.oid LOOP
    EXECUTE format('SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) FROM %s t', E'\n', '', rel)
      INTO rows_hash;
    version := version || ' ' || rows_hash;
  END LOOP;
  RETURN version;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.change_version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.change_version() TO authenticator;
