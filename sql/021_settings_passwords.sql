-- Up Migration
-- One-time passwords and password changes for the settings page. A password that `tally member
-- add` generated is known to the operator who passed it on: it is marked temporary, and the
-- member must choose their own before the page lets them do anything else.

ALTER TABLE public.user_credentials ADD COLUMN password_temporary boolean NOT NULL DEFAULT false;

-- The session lookup now also says whether its user still has a temporary password.
DROP FUNCTION tally.settings_session(bytea);
CREATE FUNCTION tally.settings_session(session_hash bytea)
RETURNS TABLE (user_id uuid, email text, csrf_token text, expires_at timestamptz, password_temporary boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
  SELECT s.user_id, u.email, s.csrf_token, s.expires_at, u.password_temporary
    FROM settings_sessions s JOIN user_credentials u ON u.id = s.user_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
$$;

-- Sets the password of a session's user (the caller has checked the current one) and ends the
-- user's other sessions. A good current password takes back the attempt counted for it, as a
-- good sign-in does. Recorded in the audit log (no workspace: a person's own password).
CREATE FUNCTION tally.settings_change_password(session_hash bytea, hash text, client_addr text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
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
  DELETE FROM sign_in_failures WHERE key = left('account:' || lower(member_email), 400);
  UPDATE sign_in_failures SET failures = greatest(failures - 1, 0)
   WHERE key = left('addr:' || client_addr, 400) AND window_ends > clock_timestamp();
  INSERT INTO audit_log (workspace_id, actor, action, details) VALUES (NULL, member_email, 'member.password', '{}');
END
$$;

REVOKE EXECUTE ON FUNCTION tally.settings_session(bytea), tally.settings_change_password(bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.settings_session(bytea), tally.settings_change_password(bytea, text, text) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.settings_change_password(bytea, text, text);
DROP FUNCTION IF EXISTS tally.settings_session(bytea);
CREATE FUNCTION tally.settings_session(session_hash bytea)
RETURNS TABLE (user_id uuid, email text, csrf_token text, expires_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, tally
AS $$
  SELECT s.user_id, u.email, s.csrf_token, s.expires_at
    FROM settings_sessions s JOIN user_credentials u ON u.id = s.user_id
   WHERE s.token_hash = session_hash AND s.expires_at > now()
$$;
REVOKE EXECUTE ON FUNCTION tally.settings_session(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.settings_session(bytea) TO authenticator;
ALTER TABLE public.user_credentials DROP COLUMN IF EXISTS password_temporary;
