-- Up Migration
-- A function's search_path that does not name pg_temp searches it FIRST for tables. Any login
-- may create temporary tables, so authenticator could shadow rate_limits or publishable_keys
-- with tables of its own and have these SECURITY DEFINER functions read them. pg_temp named
-- last is searched last. Every SECURITY DEFINER function must end its search_path with pg_temp
-- (tests/access-search-path.test.ts checks the whole
-- database).
ALTER FUNCTION tally.publishable_key_active(bytea) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION tally.rate_limit_take(text, integer, integer) SET search_path = pg_catalog, tally, pg_temp;
ALTER FUNCTION tally.rate_limit_undo(text) SET search_path = pg_catalog, tally, pg_temp;
ALTER FUNCTION tally.rate_limit_reset(text) SET search_path = pg_catalog, tally, pg_temp;
ALTER FUNCTION tally.rate_limit_get(text) SET search_path = pg_catalog, tally, pg_temp;

-- Down Migration
-- Nothing to undo: pg_temp searched last is right for every earlier version too.
