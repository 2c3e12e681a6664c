-- Up Migration
-- The server connects as `authenticator`, which cannot read public.publishable_keys. This
-- SECURITY DEFINER function answers the one question the server needs (is this key's hash an
-- active key?) and nothing more. Granted to authenticator itself: it is NOINHERIT, so a grant
-- to the API roles would not reach it.
CREATE FUNCTION tally.publishable_key_active(hash bytea) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$ SELECT EXISTS (SELECT 1 FROM publishable_keys WHERE key_hash = hash AND revoked_at IS NULL) $$;
REVOKE EXECUTE ON FUNCTION tally.publishable_key_active(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.publishable_key_active(bytea) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.publishable_key_active(bytea);
