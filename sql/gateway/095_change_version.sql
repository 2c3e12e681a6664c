-- Up Migration
-- What every Tally process polls to know that its caches are stale: one cheap statement that works
-- through any pooler (PgBouncer in transaction mode drops LISTEN's notices) and on a Citus
-- coordinator (whose two-phase commit refuses NOTIFY, and whose reference tables should carry no
-- triggers). tally.change_version() is the schema version, bumped by an event trigger after every
-- DDL command (GRANT and REVOKE included), followed by a fingerprint of the contents of the small
-- tables listed in tally.watched_relations (an app's lookup lists). The server reloads its schema
-- cache and its lists when the value differs from the one it last saw.
CREATE SEQUENCE IF NOT EXISTS tally.schema_version;

CREATE OR REPLACE FUNCTION tally.bump_schema_version() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
BEGIN
  PERFORM nextval('tally.schema_version');
END
$$;
REVOKE EXECUTE ON FUNCTION tally.bump_schema_version() FROM PUBLIC;

-- Event triggers need a superuser. Without one, schema changes reach running servers through
-- `tally migrate` (which calls tally.bump_schema_version's sequence itself) or NOTIFY pgrst where
-- LISTEN works; the README says so.
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

CREATE TABLE IF NOT EXISTS tally.watched_relations (
  relation regclass PRIMARY KEY
);

CREATE OR REPLACE FUNCTION tally.change_version() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
DECLARE
  version text;
  rel regclass;
  rows_hash text;
BEGIN
  SELECT s.last_value::text || CASE WHEN s.is_called THEN '' ELSE '-' END INTO version FROM tally.schema_version s;
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

-- Down Migration
DROP FUNCTION IF EXISTS tally.change_version();
DROP TABLE IF EXISTS tally.watched_relations;
DROP EVENT TRIGGER IF EXISTS tally_schema_changed;
DROP FUNCTION IF EXISTS tally.bump_schema_version();
DROP SEQUENCE IF EXISTS tally.schema_version;
