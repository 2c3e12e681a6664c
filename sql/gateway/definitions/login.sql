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

-- `tally migrate` and `tally up` set the password of the server's login with these (the owner
-- runs them; no API role or authenticator can). The role is the cluster's, not the database's:
-- deployments of several databases of one cluster log in with it. Its comment lists the
-- databases whose deployments log in with its password (a JSON array after the words below), so
-- that one deployment's `tally migrate` never changes it under another's (provisionServerLogin,
-- gateway/db/connect.ts). Databases dropped since are left out.
CREATE OR REPLACE FUNCTION tally.login_databases(login text) RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT coalesce(array_agg(name ORDER BY name), '{}')
    FROM pg_roles r,
         jsonb_array_elements_text(coalesce(
           substring(shobj_description(r.oid, 'pg_authid') FROM '^Tally''s server login[^[]*(\[.*\])$')::jsonb,
           '[]')) AS name
   WHERE r.rolname = login AND name IN (SELECT datname FROM pg_database)
$$;
REVOKE EXECUTE ON FUNCTION tally.login_databases(text) FROM PUBLIC;

-- This database's deployment logs in with the login's password too.
CREATE OR REPLACE FUNCTION tally.share_login_password(login text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  EXECUTE format('COMMENT ON ROLE %I IS %L', login,
                 'Tally''s server login; the databases whose deployments log in with its password: '
                 || to_jsonb(ARRAY(SELECT DISTINCT d FROM unnest(tally.login_databases(login) || current_database()) d ORDER BY d))::text);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.share_login_password(text) FROM PUBLIC;

-- A new password: only this database's deployment logs in with it.
CREATE OR REPLACE FUNCTION tally.set_login_password(login text, password text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', login, password);
  EXECUTE format('COMMENT ON ROLE %I IS %L', login,
                 'Tally''s server login; the databases whose deployments log in with its password: '
                 || to_jsonb(ARRAY[current_database()])::text);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.set_login_password(text, text) FROM PUBLIC;
