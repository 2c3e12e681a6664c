-- Up Migration
-- The schema version moves when the change that moved it commits, not before. It was a sequence,
-- and a sequence's nextval() is seen by every session at once: a server that polled between a
-- DDL command and the commit of its transaction reloaded the schema as it was, took the new
-- version for it, and never saw the change (a new table stayed unknown behind PgBouncer, where
-- no NOTIFY follows the commit). A row is read as committed.
-- (IF NOT EXISTS: an install from before the gateway had a migration set of its own runs this
-- set again over its state.)
CREATE TABLE IF NOT EXISTS tally.schema_version_row (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version bigint NOT NULL
);
INSERT INTO tally.schema_version_row (version) VALUES (1) ON CONFLICT DO NOTHING;

-- What a DBA runs after a schema change when no event trigger could be made (no superuser).
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

DROP SEQUENCE IF EXISTS tally.schema_version;

-- Down Migration
CREATE SEQUENCE tally.schema_version;
SELECT setval('tally.schema_version', (SELECT version FROM tally.schema_version_row));

CREATE OR REPLACE FUNCTION tally.bump_schema_version() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
BEGIN
  PERFORM nextval('tally.schema_version');
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
  SELECT s.last_value::text || CASE WHEN s.is_called THEN '' ELSE '-' END INTO version FROM tally.schema_version s;
  FOR rel IN SELECT w.relation FROM watched_relations w JOIN pg_class c ON c.oid = w.relation ORDER BY c.oid LOOP
    EXECUTE format('SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) FROM %s t', E'\n', '', rel)
      INTO rows_hash;
    version := version || ' ' || rows_hash;
  END LOOP;
  RETURN version;
END
$$;

DROP FUNCTION tally.schema_changed();
DROP TABLE tally.schema_version_row;
