-- Up Migration
-- The workspace settings page (/settings): members, sign-in sessions, failed sign-in counters,
-- and the functions the page calls. The server connects as `authenticator`, which has no
-- table privileges, so each thing the page does is one SECURITY DEFINER function granted to
-- authenticator. Everything a signed-in member does is keyed on the SHA-256 of their session
-- cookie, never on a user id the caller chooses: the database itself checks that the session
-- is live, that its user belongs to the workspace, and that the role may change things. The
-- changes go through tally.create_token / revoke_token / set_api_enabled, the functions the
-- CLI uses, so the audit log records the member's email as the actor.

-- authenticator is NOINHERIT and needs USAGE on tally to call these. 005_access grants it
-- too; GRANT is idempotent, and the down migration leaves it to 001's DROP SCHEMA.
GRANT USAGE ON SCHEMA tally TO authenticator;

-- Sessions of the settings page. The cookie holds a random secret; only its SHA-256 is stored.
-- The CSRF token of every form of the session is stored beside it.
CREATE TABLE tally.settings_sessions (
  token_hash bytea PRIMARY KEY CONSTRAINT settings_sessions_hash_length CHECK (octet_length(token_hash) = 32),
  user_id    uuid NOT NULL REFERENCES public.user_credentials (id) ON DELETE CASCADE,
  csrf_token text NOT NULL CONSTRAINT settings_sessions_csrf_length CHECK (char_length(csrf_token) BETWEEN 32 AND 128),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX settings_sessions_user_idx ON tally.settings_sessions (user_id);
CREATE INDEX settings_sessions_expires_idx ON tally.settings_sessions (expires_at);

-- Sign-in attempts not (yet) proven good, per client address ('addr:…') and per account
-- ('account:<lower(email)>', whether or not the account exists, so the limit says nothing
-- about which emails are known). Fixed windows; shared by every process on the database.
CREATE TABLE tally.sign_in_failures (
  key         text PRIMARY KEY CONSTRAINT sign_in_failures_key_length CHECK (char_length(key) <= 400),
  failures    integer NOT NULL,
  window_ends timestamptz NOT NULL
);

-- Adds a member to a workspace (the CLI's `tally member add`; owner connection only). A new
-- email needs a password hash; for a known email a hash resets the password and ends the
-- user's sessions, and no hash keeps it. Adding an existing member again changes the role.
CREATE FUNCTION tally.add_member(ws uuid, member_email text, member_role text, hash text, actor text)
RETURNS TABLE (user_id uuid, created boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, public, tally
AS $$
#variable_conflict use_column
DECLARE
  uid uuid;
  is_new boolean := false;
BEGIN
  SELECT u.id INTO uid FROM user_credentials u WHERE lower(u.email) = lower(member_email);
  IF uid IS NULL THEN
    IF hash IS NULL THEN
      RAISE null_value_not_allowed USING MESSAGE = 'a new member needs a password';
    END IF;
    INSERT INTO user_credentials (email, password_hash) VALUES (lower(member_email), hash) RETURNING id INTO uid;
    is_new := true;
  ELSIF hash IS NOT NULL THEN
    UPDATE user_credentials SET password_hash = hash, updated_at = now() WHERE id = uid;
    DELETE FROM settings_sessions s WHERE s.user_id = uid;
  END IF;
  INSERT INTO workspace_members (workspace_id, user_id, role) VALUES (ws, uid, member_role)
  ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role;
  INSERT INTO audit_log (workspace_id, actor, action, details)
    VALUES (ws, actor, 'member.add', jsonb_build_object('email', lower(member_email), 'role', member_role,
      'user_created', is_new, 'password_set', hash IS NOT NULL));
  RETURN QUERY SELECT uid, is_new;
END
$$;

-- Counts a sign-in attempt against the address and the account *before* the password is
-- checked, so parallel guesses cannot slip past the limit; a good sign-in takes its attempt
-- back (settings_session_create). Returns the seconds to wait when either counter is over its
-- limit, else 0.
CREATE FUNCTION tally.settings_sign_in_attempt(client_addr text, email text, addr_limit integer, account_limit integer, window_seconds integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$
DECLARE
  t timestamptz := clock_timestamp();
  w interval := make_interval(secs => window_seconds);
  wait integer := 0;
  c record;
  n integer;
  ends timestamptz;
BEGIN
  IF random() < 0.01 THEN
    DELETE FROM sign_in_failures f WHERE f.window_ends < t;
  END IF;
  FOR c IN SELECT * FROM (VALUES ('addr:' || client_addr, addr_limit), ('account:' || lower(email), account_limit)) v (key, lim) LOOP
    INSERT INTO sign_in_failures AS f (key, failures, window_ends) VALUES (left(c.key, 400), 1, t + w)
    ON CONFLICT (key) DO UPDATE
      SET failures = CASE WHEN f.window_ends <= t THEN 1 ELSE f.failures + 1 END,
          window_ends = CASE WHEN f.window_ends <= t THEN t + w ELSE f.window_ends END
    RETURNING f.failures, f.window_ends INTO n, ends;
    IF n > c.lim THEN
      wait := greatest(wait, ceil(extract(epoch FROM ends - t))::integer, 1);
    END IF;
  END LOOP;
  RETURN wait;
END
$$;

-- The user id and password hash behind an email (no row for an unknown one).
CREATE FUNCTION tally.settings_credentials(email text)
RETURNS TABLE (user_id uuid, password_hash text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$ SELECT u.id, u.password_hash FROM user_credentials u WHERE lower(u.email) = lower(settings_credentials.email) $$;

-- A session after a good sign-in: the account's failed attempts are forgotten and the
-- address's good attempt is taken back (its earlier failures still count). Sweeps ended
-- sessions now and then.
CREATE FUNCTION tally.settings_session_create(uid uuid, session_hash bytea, csrf text, lifetime_seconds integer, client_addr text)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
DECLARE
  ends timestamptz := now() + make_interval(secs => lifetime_seconds);
BEGIN
  IF random() < 0.05 THEN
    DELETE FROM settings_sessions s WHERE s.expires_at < now();
  END IF;
  INSERT INTO settings_sessions (token_hash, user_id, csrf_token, expires_at) VALUES (session_hash, uid, csrf, ends);
  DELETE FROM sign_in_failures f
   WHERE f.key = left('account:' || (SELECT lower(u.email) FROM user_credentials u WHERE u.id = uid), 400);
  UPDATE sign_in_failures f SET failures = greatest(f.failures - 1, 0)
   WHERE f.key = left('addr:' || client_addr, 400) AND f.window_ends > clock_timestamp();
  RETURN ends;
END
$$;

-- The live session behind a cookie (no row once it has expired or ended).
CREATE FUNCTION tally.settings_session(session_hash bytea)
RETURNS TABLE (user_id uuid, email text, csrf_token text, expires_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
  SELECT s.user_id, u.email, s.csrf_token, s.expires_at
    FROM settings_sessions s JOIN user_credentials u ON u.id = s.user_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
$$;

CREATE FUNCTION tally.settings_session_end(session_hash bytea) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
AS $$ DELETE FROM settings_sessions WHERE token_hash = session_hash $$;

-- The workspaces of a session's user, with the user's role in each.
CREATE FUNCTION tally.settings_workspaces(session_hash bytea)
RETURNS TABLE (id uuid, name text, role text, api_enabled boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
  SELECT w.id, w.name, m.role, w.api_enabled
    FROM settings_sessions s
    JOIN workspace_members m ON m.user_id = s.user_id
    JOIN workspaces w ON w.id = m.workspace_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
   ORDER BY lower(w.name), w.id
$$;

-- The tokens of a workspace, for any member of it; never the hash.
CREATE FUNCTION tally.settings_tokens(session_hash bytea, ws uuid)
RETURNS TABLE (id uuid, label text, scope text, created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
  SELECT t.id, t.label, t.scope, t.created_at, t.last_used_at, t.revoked_at
    FROM api_tokens t
   WHERE t.workspace_id = ws
     AND EXISTS (SELECT 1 FROM settings_sessions s JOIN workspace_members m ON m.user_id = s.user_id
                  WHERE s.token_hash = session_hash AND s.expires_at > now() AND m.workspace_id = ws)
   ORDER BY t.revoked_at IS NOT NULL, t.created_at DESC, t.id
$$;

-- The email of a session's user who may change workspace `ws` (owner or admin); otherwise
-- insufficient_privilege. Not granted: the functions below call it.
CREATE FUNCTION tally.settings_manager(session_hash bytea, ws uuid) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, tally
AS $$
DECLARE
  member record;
BEGIN
  SELECT u.email, m.role INTO member
    FROM settings_sessions s
    JOIN user_credentials u ON u.id = s.user_id
    JOIN workspace_members m ON m.user_id = s.user_id AND m.workspace_id = ws
   WHERE s.token_hash = session_hash AND s.expires_at > now();
  IF NOT FOUND OR member.role NOT IN ('owner', 'admin') THEN
    RAISE insufficient_privilege USING MESSAGE = 'only an owner or admin of the workspace may change its settings';
  END IF;
  RETURN member.email;
END
$$;

CREATE FUNCTION tally.settings_create_token(session_hash bytea, ws uuid, token_scope text, token_label text, hash bytea) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
BEGIN
  RETURN tally.create_token(ws, token_scope, token_label, hash, tally.settings_manager(session_hash, ws));
END
$$;

CREATE FUNCTION tally.settings_revoke_token(session_hash bytea, ws uuid, token_id uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
BEGIN
  RETURN tally.revoke_token(token_id, ws, tally.settings_manager(session_hash, ws));
END
$$;

CREATE FUNCTION tally.settings_set_api_enabled(session_hash bytea, ws uuid, enabled boolean) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
BEGIN
  PERFORM tally.set_api_enabled(ws, enabled, tally.settings_manager(session_hash, ws));
END
$$;

REVOKE EXECUTE ON FUNCTION tally.add_member(uuid, text, text, text, text),
  tally.settings_sign_in_attempt(text, text, integer, integer, integer), tally.settings_credentials(text),
  tally.settings_session_create(uuid, bytea, text, integer, text), tally.settings_session(bytea),
  tally.settings_session_end(bytea), tally.settings_workspaces(bytea), tally.settings_tokens(bytea, uuid),
  tally.settings_manager(bytea, uuid), tally.settings_create_token(bytea, uuid, text, text, bytea),
  tally.settings_revoke_token(bytea, uuid, uuid), tally.settings_set_api_enabled(bytea, uuid, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  tally.settings_sign_in_attempt(text, text, integer, integer, integer), tally.settings_credentials(text),
  tally.settings_session_create(uuid, bytea, text, integer, text), tally.settings_session(bytea),
  tally.settings_session_end(bytea), tally.settings_workspaces(bytea), tally.settings_tokens(bytea, uuid),
  tally.settings_create_token(bytea, uuid, text, text, bytea), tally.settings_revoke_token(bytea, uuid, uuid),
  tally.settings_set_api_enabled(bytea, uuid, boolean) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.settings_set_api_enabled(bytea, uuid, boolean), tally.settings_revoke_token(bytea, uuid, uuid),
  tally.settings_create_token(bytea, uuid, text, text, bytea), tally.settings_manager(bytea, uuid),
  tally.settings_tokens(bytea, uuid), tally.settings_workspaces(bytea), tally.settings_session_end(bytea),
  tally.settings_session(bytea), tally.settings_session_create(uuid, bytea, text, integer, text),
  tally.settings_credentials(text), tally.settings_sign_in_attempt(text, text, integer, integer, integer),
  tally.add_member(uuid, text, text, text, text);
DROP TABLE IF EXISTS tally.sign_in_failures, tally.settings_sessions;
