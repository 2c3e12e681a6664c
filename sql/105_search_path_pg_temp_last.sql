-- Up Migration
-- A function's search_path that does not name pg_temp searches it FIRST for tables. Any login
-- may create temporary tables, so authenticator could shadow settings_sessions,
-- user_credentials and workspace_members with tables of its own and have
-- tally.settings_create_token mint a token for any workspace under a forged actor. pg_temp named
-- last is searched last. This puts it last in every function of this database that is SECURITY
-- DEFINER or sets a search_path (a helper such as settings_manager runs with its caller's
-- rights, inside a SECURITY DEFINER function). Extensions' functions are theirs to keep.
-- A later migration that creates or replaces such a function writes
-- `SET search_path = pg_catalog, public, pg_temp` (tests/access-search-path.test.ts checks
-- the whole database).
DO $$
DECLARE
  f record;
  path text;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure AS sig,
           (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) c
             WHERE c LIKE 'search_path=%') AS current_path
      FROM pg_proc p
      JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE p.prokind IN ('f', 'p')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname NOT LIKE 'pg\_%'
       AND NOT EXISTS (SELECT 1 FROM pg_depend d
                        WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
       AND (p.prosecdef OR EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%'))
  LOOP
    -- The path without any pg_temp entry (a definer function without a path gets the usual one),
    -- then pg_temp.
    path := coalesce(f.current_path, 'pg_catalog, public');
    path := array_to_string(array(
      SELECT btrim(e) FROM unnest(string_to_array(path, ',')) e WHERE btrim(e) NOT IN ('pg_temp', '"pg_temp"', '')
    ), ', ');
    EXECUTE format('ALTER ROUTINE %s SET search_path = %s', f.sig, concat_ws(', ', nullif(path, ''), 'pg_temp'));
  END LOOP;
END
$$;

-- Down Migration
-- Nothing to undo: pg_temp searched last is right for every earlier version too.
