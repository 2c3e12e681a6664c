-- Up Migration
-- The gateway's own state, apart from any app's tables: the roles it switches between, schema
-- `tally` with the functions the server calls on its own login (publishable keys, rate limits,
-- the login's password) and jwt_claims() for policies. A database that is not Tally's gets only
-- this (`tally migrate --gateway-only`); Tally's finance app (the migrations in sql/) builds on
-- it. Every statement is idempotent: on a database migrated before the gateway had a set of its
-- own, the app's first migrations made the same objects, and this finds them in place.
--
-- Roles are cluster-wide, so they are created only when missing (several databases on one
-- cluster share them) and are not dropped by the down migration; what belongs to this
-- database (schemas, tables, grants) is.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'anon') THEN
    CREATE ROLE anon NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'api_read') THEN
    CREATE ROLE api_read NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'api_write') THEN
    CREATE ROLE api_write NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'authenticator') THEN
    -- The gateway's login role: it has no privileges of its own (NOINHERIT) and only
    -- becomes one of the API roles with SET LOCAL ROLE inside a request's transaction.
    CREATE ROLE authenticator LOGIN NOINHERIT;
  END IF;
END
$$;

GRANT api_read TO api_write;
GRANT anon, api_read, api_write TO authenticator;

CREATE SCHEMA IF NOT EXISTS tally;
REVOKE ALL ON SCHEMA tally FROM PUBLIC;
GRANT USAGE ON SCHEMA tally TO anon, api_read, api_write;

-- Functions are executable by PUBLIC by default; Tally's are granted one by one.
ALTER DEFAULT PRIVILEGES IN SCHEMA tally REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- authenticator is NOINHERIT: the USAGE that the API roles have on schema tally does not
-- reach it, and it needs it to call the functions below.
GRANT USAGE ON SCHEMA tally TO authenticator;

-- Publishable (public client) keys for the direct table interface: hashed as well.
CREATE TABLE IF NOT EXISTS public.publishable_keys (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  label      text NOT NULL DEFAULT '',
  key_hash   bytea NOT NULL UNIQUE CONSTRAINT publishable_keys_hash_length CHECK (octet_length(key_hash) = 32),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- The claims of the request's JWT, as the gateway sets them for the transaction.
CREATE OR REPLACE FUNCTION tally.jwt_claims() RETURNS jsonb
LANGUAGE sql STABLE
AS $$ SELECT coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb $$;
REVOKE EXECUTE ON FUNCTION tally.jwt_claims() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.jwt_claims() TO anon, api_read, api_write;

-- The server connects as `authenticator`, which cannot read public.publishable_keys. This
-- SECURITY DEFINER function answers the one question the server needs (is this key's hash an
-- active key?) and nothing more. Granted to authenticator itself: it is NOINHERIT, so a grant
-- to the API roles would not reach it.
CREATE OR REPLACE FUNCTION tally.publishable_key_active(hash bytea) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$ SELECT EXISTS (SELECT 1 FROM publishable_keys WHERE key_hash = hash AND revoked_at IS NULL) $$;
REVOKE EXECUTE ON FUNCTION tally.publishable_key_active(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.publishable_key_active(bytea) TO authenticator;

-- Rate-limit counters shared by every Tally process on this database: fixed windows, one row
-- per client key (a workspace token's id or a client address, never a secret). UNLOGGED: a
-- counter lost in a crash costs one window of leniency, and the table takes a write per request.
CREATE UNLOGGED TABLE IF NOT EXISTS tally.rate_limits (
  key      text PRIMARY KEY CONSTRAINT rate_limits_key_length CHECK (char_length(key) <= 200),
  hits     integer NOT NULL,
  reset_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_limits_reset_idx ON tally.rate_limits (reset_at);

-- n hits at once: an atomic upsert that starts a new window when the old one has ended, and
-- returns the hits of the window after adding n, and when it ends. A low limit takes one hit
-- per request (counted exactly across processes); a high one takes blocks that a Tally process
-- hands out itself (gateway/auth/ratelimit.ts leases), so a request does not pay a round trip
-- of its own for the counter. Now and then it sweeps long-ended windows, so the table stays as
-- small as the set of recently active clients.
CREATE OR REPLACE FUNCTION tally.rate_limit_take(client_key text, window_ms integer, n integer)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$
#variable_conflict use_column
DECLARE
  t timestamptz := clock_timestamp();
  w interval := make_interval(secs => window_ms / 1000.0);
BEGIN
  IF n < 1 THEN
    RAISE EXCEPTION 'n must be at least 1';
  END IF;
  IF random() < 0.001 THEN
    DELETE FROM rate_limits r WHERE r.reset_at < t - interval '1 hour';
  END IF;
  RETURN QUERY
    INSERT INTO rate_limits AS r (key, hits, reset_at) VALUES (client_key, n, t + w)
    ON CONFLICT (key) DO UPDATE
      SET hits = CASE WHEN r.reset_at <= t THEN n ELSE r.hits + n END,
          reset_at = CASE WHEN r.reset_at <= t THEN t + w ELSE r.reset_at END
    RETURNING r.hits, r.reset_at;
END
$$;

-- Takes back a hit of the current window (express-rate-limit's skip of successful requests).
CREATE OR REPLACE FUNCTION tally.rate_limit_undo(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$
  UPDATE rate_limits SET hits = greatest(hits - 1, 0)
   WHERE key = client_key AND reset_at > clock_timestamp()
$$;

CREATE OR REPLACE FUNCTION tally.rate_limit_reset(client_key text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$ DELETE FROM rate_limits WHERE key = client_key $$;

CREATE OR REPLACE FUNCTION tally.rate_limit_get(client_key text)
RETURNS TABLE (hits integer, reset_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$ SELECT r.hits, r.reset_at FROM rate_limits r WHERE r.key = client_key AND r.reset_at > clock_timestamp() $$;

REVOKE EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.rate_limit_take(text, integer, integer), tally.rate_limit_undo(text),
  tally.rate_limit_reset(text), tally.rate_limit_get(text) TO authenticator;

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

-- Down Migration
-- Runs after the app's migrations are down (or when there are none). Nothing is dropped with
-- CASCADE: a policy of the database's own that calls tally.jwt_claims() stops the down instead
-- of disappearing with it.
DROP FUNCTION IF EXISTS tally.set_login_password(text, text);
DROP FUNCTION IF EXISTS tally.rate_limit_get(text), tally.rate_limit_reset(text), tally.rate_limit_undo(text),
  tally.rate_limit_take(text, integer, integer);
DROP TABLE IF EXISTS tally.rate_limits;
DROP FUNCTION IF EXISTS tally.publishable_key_active(bytea);
DROP TABLE IF EXISTS public.publishable_keys;
DROP FUNCTION IF EXISTS tally.jwt_claims();
DROP SCHEMA IF EXISTS tally;
-- Roles are cluster-wide and may serve other databases: they stay.
