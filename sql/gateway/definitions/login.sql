-- The functions the server calls on its own login (authenticator), which cannot read a table:
-- each is SECURITY DEFINER, granted to authenticator itself (it is NOINHERIT, so a grant to the
-- API roles would not reach it), and answers one question and nothing more.
--
-- A SECURITY DEFINER function's search_path names pg_temp last: not named, pg_temp is searched
-- FIRST, and any login may create temporary tables that would shadow rate_limits or
-- publishable_keys (tests/access-search-path.test.ts checks every function of the database).

-- Is this key's hash an active publishable key?
CREATE OR REPLACE FUNCTION tally.publishable_key_active(hash bytea) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT EXISTS (SELECT 1 FROM publishable_keys WHERE key_hash = hash AND revoked_at IS NULL) $$;
REVOKE EXECUTE ON FUNCTION tally.publishable_key_active(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.publishable_key_active(bytea) TO authenticator;

-- `tally migrate` and `tally up` set the password of the server's login with this (the owner
-- runs it; no API role or authenticator can).
CREATE OR REPLACE FUNCTION tally.set_login_password(login text, password text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', login, password);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.set_login_password(text, text) FROM PUBLIC;
