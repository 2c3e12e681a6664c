-- The workspace settings page (/settings): members, sign-in sessions and throttling, and what a
-- signed-in member may do. The server connects as `authenticator`, which has no table
-- privileges, so each thing the page does is one SECURITY DEFINER function granted to
-- authenticator. Everything a signed-in member does is keyed on the SHA-256 of their session
-- cookie, never on a user id the caller chooses: the database itself checks that the session is
-- live, that its user belongs to the workspace, and that the role may change things. The changes
-- go through tally.create_token / revoke_token / set_api_enabled (admin.sql), the functions the
-- CLI uses, so the audit log records the member's email as the actor.

-- Adds a member to a workspace (the CLI's `tally member add`; owner connection only). A new
-- email needs a password hash; for a known email a hash resets the password and ends the
-- user's sessions, and no hash keeps it. Adding an existing member again changes the role.
CREATE OR REPLACE FUNCTION tally.add_member(ws uuid, member_email text, member_role text, hash text, actor text)
RETURNS TABLE (user_id uuid, created boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, public, tally, pg_temp
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
  PERFORM tally.audit(ws, actor, 'member.add', jsonb_build_object('email', lower(member_email), 'role', member_role,
      'user_created', is_new, 'password_set', hash IS NOT NULL));
  RETURN QUERY SELECT uid, is_new;
END
$$;

-- Sign-in is throttled per (email, client address) and per address, with growing delays, not
-- locked per email: an attacker's failures slow only the attacker's own address (and that
-- address with that email), so knowing an owner's email does not keep the owner off the page
-- that revokes tokens. Counted *before* the password is checked, so parallel guesses cannot slip
-- past the limit; a good sign-in takes its attempt back (settings_session_create). Within a
-- window, the first `limit` failures of a key cost nothing; from then on each attempt sets a
-- delay before the next is looked at: 1 s, 2 s, 4 s, … up to the window's length. Returns the
-- seconds to wait, else 0. (account_limit is the limit per email *and address*.)
CREATE OR REPLACE FUNCTION tally.settings_sign_in_attempt(client_addr text, email text, addr_limit integer, account_limit integer, window_seconds integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$
DECLARE
  t timestamptz;
  w interval := make_interval(secs => window_seconds);
  until timestamptz;
  c record;
  n integer;
BEGIN
  -- One address's attempts are decided one after the other, so parallel guesses cannot all
  -- pass the same "not delayed" check.
  PERFORM pg_advisory_xact_lock(hashtextextended('tally.sign_in:' || client_addr, 0));
  t := clock_timestamp();
  IF random() < 0.01 THEN
    DELETE FROM sign_in_failures f WHERE f.window_ends < t AND (f.blocked_until IS NULL OR f.blocked_until < t);
  END IF;
  SELECT max(f.blocked_until) INTO until FROM sign_in_failures f
   WHERE f.key IN (left('addr:' || client_addr, 400), left('pair:' || client_addr || ' ' || lower(email), 400))
     AND f.blocked_until > t;
  IF until IS NOT NULL THEN
    RETURN greatest(ceil(extract(epoch FROM until - t))::integer, 1);
  END IF;
  FOR c IN SELECT * FROM (VALUES (left('addr:' || client_addr, 400), addr_limit),
                                 (left('pair:' || client_addr || ' ' || lower(email), 400), account_limit)) v (key, lim) LOOP
    INSERT INTO sign_in_failures AS f (key, failures, window_ends) VALUES (c.key, 1, t + w)
    ON CONFLICT (key) DO UPDATE
      SET failures = CASE WHEN f.window_ends <= t THEN 1 ELSE f.failures + 1 END,
          window_ends = CASE WHEN f.window_ends <= t THEN t + w ELSE f.window_ends END
    RETURNING f.failures INTO n;
    IF n >= c.lim THEN
      UPDATE sign_in_failures f
         SET blocked_until = t + make_interval(secs => least(power(2, least(n - c.lim, 30)), window_seconds))
       WHERE f.key = c.key;
    END IF;
  END LOOP;
  RETURN 0;
END
$$;

-- The user id and password hash behind an email (no row for an unknown one).
CREATE OR REPLACE FUNCTION tally.settings_credentials(email text)
RETURNS TABLE (user_id uuid, password_hash text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT u.id, u.password_hash FROM user_credentials u WHERE lower(u.email) = lower(settings_credentials.email) $$;

-- A session after a good sign-in; sweeps ended sessions now and then. A member holds at most
-- sessions_per_member sessions: a sign-in past them ends the oldest (never the new one). Each
-- sign-in stored a row until it expired, so a member signing in again and again grew the table
-- without end.
CREATE OR REPLACE FUNCTION tally.settings_session_create(uid uuid, session_hash bytea, csrf text, lifetime_seconds integer, client_addr text)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
DECLARE
  ends timestamptz := now() + make_interval(secs => lifetime_seconds);
  sessions_per_member constant integer := 20;
BEGIN
  IF random() < 0.05 THEN
    DELETE FROM settings_sessions s WHERE s.expires_at < now();
  END IF;
  INSERT INTO settings_sessions (token_hash, user_id, csrf_token, expires_at) VALUES (session_hash, uid, csrf, ends);
  DELETE FROM settings_sessions s
   WHERE s.token_hash IN (SELECT o.token_hash FROM settings_sessions o WHERE o.user_id = uid
                           ORDER BY o.token_hash = session_hash DESC, o.created_at DESC OFFSET sessions_per_member);
  -- The member's failures from this address are forgotten; the address's good attempt is
  -- taken back (its earlier failures still count).
  DELETE FROM sign_in_failures f
   WHERE f.key = left('pair:' || client_addr || ' ' || (SELECT lower(u.email) FROM user_credentials u WHERE u.id = uid), 400);
  UPDATE sign_in_failures f SET failures = greatest(f.failures - 1, 0)
   WHERE f.key = left('addr:' || client_addr, 400) AND f.window_ends > clock_timestamp();
  RETURN ends;
END
$$;

-- The live session behind a cookie (no row once it has expired or ended), and whether its user
-- still has a temporary password.
CREATE OR REPLACE FUNCTION tally.settings_session(session_hash bytea)
RETURNS TABLE (user_id uuid, email text, csrf_token text, expires_at timestamptz, password_temporary boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
  SELECT s.user_id, u.email, s.csrf_token, s.expires_at, u.password_temporary
    FROM settings_sessions s JOIN user_credentials u ON u.id = s.user_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
$$;

CREATE OR REPLACE FUNCTION tally.settings_session_end(session_hash bytea) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally, pg_temp
AS $$ DELETE FROM settings_sessions WHERE token_hash = session_hash $$;

-- The workspaces of a session's user, with the user's role in each.
CREATE OR REPLACE FUNCTION tally.settings_workspaces(session_hash bytea)
RETURNS TABLE (id uuid, name text, role text, api_enabled boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
  SELECT w.id, w.name, m.role, w.api_enabled
    FROM settings_sessions s
    JOIN workspace_members m ON m.user_id = s.user_id
    JOIN workspaces w ON w.id = m.workspace_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
   ORDER BY lower(w.name), w.id
$$;

-- The tokens of a workspace, for any member of it; never the hash.
CREATE OR REPLACE FUNCTION tally.settings_tokens(session_hash bytea, ws uuid)
RETURNS TABLE (id uuid, label text, scope text, created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
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
CREATE OR REPLACE FUNCTION tally.settings_manager(session_hash bytea, ws uuid) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, tally, pg_temp
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

CREATE OR REPLACE FUNCTION tally.settings_create_token(session_hash bytea, ws uuid, token_scope text, token_label text, hash bytea) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
BEGIN
  RETURN tally.create_token(ws, token_scope, token_label, hash, tally.settings_manager(session_hash, ws));
END
$$;

CREATE OR REPLACE FUNCTION tally.settings_revoke_token(session_hash bytea, ws uuid, token_id uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
BEGIN
  RETURN tally.revoke_token(token_id, ws, tally.settings_manager(session_hash, ws));
END
$$;

CREATE OR REPLACE FUNCTION tally.settings_set_api_enabled(session_hash bytea, ws uuid, enabled boolean) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
BEGIN
  PERFORM tally.set_api_enabled(ws, enabled, tally.settings_manager(session_hash, ws));
END
$$;

-- Sets the password of a session's user (the caller has checked the current one) and ends the
-- user's other sessions. A good current password takes back the attempt counted for it, as a
-- good sign-in does. Recorded in the audit log (no workspace: a person's own password).
CREATE OR REPLACE FUNCTION tally.settings_change_password(session_hash bytea, hash text, client_addr text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally, pg_temp
AS $$
DECLARE
  uid uuid;
  member_email text;
BEGIN
  SELECT s.user_id, u.email INTO uid, member_email
    FROM settings_sessions s JOIN user_credentials u ON u.id = s.user_id
   WHERE s.token_hash = session_hash AND s.expires_at > now();
  IF NOT FOUND THEN
    RAISE insufficient_privilege USING MESSAGE = 'the session has ended';
  END IF;
  UPDATE user_credentials SET password_hash = hash, password_temporary = false, updated_at = now() WHERE id = uid;
  DELETE FROM settings_sessions WHERE user_id = uid AND token_hash <> session_hash;
  DELETE FROM sign_in_failures WHERE key = left('pair:' || client_addr || ' ' || lower(member_email), 400);
  UPDATE sign_in_failures SET failures = greatest(failures - 1, 0)
   WHERE key = left('addr:' || client_addr, 400) AND window_ends > clock_timestamp();
  PERFORM tally.audit(NULL, member_email, 'member.password', '{}');
END
$$;

-- The latest changes of workspace `ws` for its settings page: for a session of one of its
-- members, else none. The membership is read first, on the coordinator; the activity then by the
-- workspace, on its shard.
CREATE OR REPLACE FUNCTION tally.settings_activity(session_hash bytea, ws uuid, max integer)
RETURNS TABLE (at timestamptz, table_name text, record_id text, action text, actor text, token_name text,
               scope text, member text, surface text, undo_of uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM tally.settings_sessions s JOIN public.workspace_members m ON m.user_id = s.user_id
                  WHERE s.token_hash = session_hash AND s.expires_at > now() AND m.workspace_id = ws) THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT a.at, a.table_name, a.record_id, a.action, a.actor, a.token_name, a.scope, a.member, a.surface, a.undo_of
      FROM public.activity a
     WHERE a.workspace_id = ws
     ORDER BY a.at DESC, a.id DESC
     LIMIT greatest(least(max, 100), 1);
END
$$;

REVOKE EXECUTE ON FUNCTION tally.add_member(uuid, text, text, text, text),
  tally.settings_sign_in_attempt(text, text, integer, integer, integer), tally.settings_credentials(text),
  tally.settings_session_create(uuid, bytea, text, integer, text), tally.settings_session(bytea),
  tally.settings_session_end(bytea), tally.settings_workspaces(bytea), tally.settings_tokens(bytea, uuid),
  tally.settings_manager(bytea, uuid), tally.settings_create_token(bytea, uuid, text, text, bytea),
  tally.settings_revoke_token(bytea, uuid, uuid), tally.settings_set_api_enabled(bytea, uuid, boolean),
  tally.settings_change_password(bytea, text, text), tally.settings_activity(bytea, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  tally.settings_sign_in_attempt(text, text, integer, integer, integer), tally.settings_credentials(text),
  tally.settings_session_create(uuid, bytea, text, integer, text), tally.settings_session(bytea),
  tally.settings_session_end(bytea), tally.settings_workspaces(bytea), tally.settings_tokens(bytea, uuid),
  tally.settings_create_token(bytea, uuid, text, text, bytea), tally.settings_revoke_token(bytea, uuid, uuid),
  tally.settings_set_api_enabled(bytea, uuid, boolean), tally.settings_change_password(bytea, text, text),
  tally.settings_activity(bytea, uuid, integer) TO authenticator;
