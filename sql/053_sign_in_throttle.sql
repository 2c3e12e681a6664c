-- Up Migration
-- Settings sign-in: throttled per (email, client address) and per address, with growing delays,
-- instead of a lock per email. Before, five wrong passwords from anywhere locked an email for
-- 15 minutes, so anyone who knew an owner's email could keep them off the page that revokes
-- tokens during an incident. Now an attacker's failures slow only the attacker's own address
-- (and that address with that email); the member signs in from theirs.
--
-- Keys of tally.sign_in_failures: 'addr:<address>' and 'pair:<address> <lower(email)>' (whether
-- or not the email is known, so the answer says nothing about which emails are). Within a
-- window, the first `limit` failures of a key cost nothing; from then on each attempt sets a
-- delay before the next is looked at: 1 s, 2 s, 4 s, … up to the window's length.

ALTER TABLE tally.sign_in_failures ADD COLUMN blocked_until timestamptz;
DELETE FROM tally.sign_in_failures WHERE key LIKE 'account:%';

-- (account_limit keeps its name: it is the limit per email *and address* now.)
CREATE OR REPLACE FUNCTION tally.settings_sign_in_attempt(client_addr text, email text, addr_limit integer, account_limit integer, window_seconds integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, tally
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

CREATE OR REPLACE FUNCTION tally.settings_session_create(uid uuid, session_hash bytea, csrf text, lifetime_seconds integer, client_addr text)
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
  -- The member's failures from this address are forgotten; the address's good attempt is
  -- taken back (its earlier failures still count).
  DELETE FROM sign_in_failures f
   WHERE f.key = left('pair:' || client_addr || ' ' || (SELECT lower(u.email) FROM user_credentials u WHERE u.id = uid), 400);
  UPDATE sign_in_failures f SET failures = greatest(f.failures - 1, 0)
   WHERE f.key = left('addr:' || client_addr, 400) AND f.window_ends > clock_timestamp();
  RETURN ends;
END
$$;

CREATE OR REPLACE FUNCTION tally.settings_change_password(session_hash bytea, hash text, client_addr text) RETURNS void
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
  DELETE FROM sign_in_failures WHERE key = left('pair:' || client_addr || ' ' || lower(member_email), 400);
  UPDATE sign_in_failures SET failures = greatest(failures - 1, 0)
   WHERE key = left('addr:' || client_addr, 400) AND window_ends > clock_timestamp();
  INSERT INTO audit_log (workspace_id, actor, action, details) VALUES (NULL, member_email, 'member.password', '{}');
END
$$;

-- Down Migration
-- The functions go back to their shapes of before (per-email lock), from the earlier migrations.
CREATE OR REPLACE FUNCTION tally.settings_sign_in_attempt(client_addr text, email text, addr_limit integer, account_limit integer, window_seconds integer)
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
CREATE OR REPLACE FUNCTION tally.settings_session_create(uid uuid, session_hash bytea, csrf text, lifetime_seconds integer, client_addr text)
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
CREATE OR REPLACE FUNCTION tally.settings_change_password(session_hash bytea, hash text, client_addr text) RETURNS void
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
ALTER TABLE tally.sign_in_failures DROP COLUMN blocked_until;
