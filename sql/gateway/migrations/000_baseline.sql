-- Up Migration
-- The gateway's own state, apart from any app's tables: the roles it switches between, schema
-- `tally`, and the tables behind publishable keys, rate limits and the schema version every
-- server polls. Its functions are in sql/gateway/definitions/ (applied after this set). A
-- database that is not Tally's gets only this set (`tally migrate --gateway-only`); the finance
-- app (sql/app/) builds on it.
--
-- Roles are cluster-wide, so they are created only when missing (several databases on one
-- cluster share them) and are not dropped by the down migration; what belongs to this database
-- (schemas, tables, grants) is.

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

-- Functions are executable by PUBLIC by default; Tally's are granted one by one. (A per-schema
-- default cannot take away what the global default gives: each definition file revokes it from
-- its functions as well.)
ALTER DEFAULT PRIVILEGES IN SCHEMA tally REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- authenticator is NOINHERIT: the USAGE that the API roles have on schema tally does not
-- reach it, and it needs it to call the gateway's functions.
GRANT USAGE ON SCHEMA tally TO authenticator;

-- Publishable (public client) keys for the direct table interface: hashed as well.
CREATE TABLE IF NOT EXISTS public.publishable_keys (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  label      text NOT NULL DEFAULT '',
  key_hash   bytea NOT NULL UNIQUE CONSTRAINT publishable_keys_hash_length CHECK (octet_length(key_hash) = 32),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- Rate-limit counters shared by every Tally process on this database: fixed windows, one row
-- per client key (a workspace token's id or a client address, never a secret). UNLOGGED: a
-- counter lost in a crash costs one window of leniency, and the table takes a write per request.
CREATE UNLOGGED TABLE IF NOT EXISTS tally.rate_limits (
  key      text PRIMARY KEY CONSTRAINT rate_limits_key_length CHECK (char_length(key) <= 200),
  hits     integer NOT NULL,
  reset_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_limits_reset_idx ON tally.rate_limits (reset_at);

-- What every Tally process polls to know that its caches are stale (tally.change_version()):
-- the schema version, moved after every DDL command when the change commits (a row is read as
-- committed; a sequence's nextval() would be seen before the commit), and a fingerprint of the
-- small tables listed in watched_relations (an app's lookup lists).
CREATE TABLE IF NOT EXISTS tally.schema_version_row (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version bigint NOT NULL
);
INSERT INTO tally.schema_version_row (version) VALUES (1) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS tally.watched_relations (
  relation regclass PRIMARY KEY
);

-- Down Migration
-- Runs after the app's set is down (or when there is none). Nothing is dropped with CASCADE: a
-- policy of the database's own that calls tally.jwt_claims() stops the down instead of
-- disappearing with it. The gateway's functions go first (what sql/gateway/definitions/ made).
DROP EVENT TRIGGER IF EXISTS tally_schema_changed;
DROP FUNCTION IF EXISTS tally.jwt_claims(), tally.publishable_key_active(bytea),
  tally.rate_limit_take(text, integer, integer), tally.rate_limit_take_if_fits(text, integer, integer, integer),
  tally.rate_limit_undo(text), tally.rate_limit_reset(text), tally.rate_limit_get(text),
  tally.set_login_password(text, text), tally.share_login_password(text), tally.login_databases(text),
  tally.schema_changed(), tally.bump_schema_version(),
  tally.change_version();
DROP TABLE IF EXISTS tally.watched_relations, tally.schema_version_row, tally.rate_limits, public.publishable_keys;
DROP SCHEMA IF EXISTS tally;
-- Roles are cluster-wide and may serve other databases: they stay.
