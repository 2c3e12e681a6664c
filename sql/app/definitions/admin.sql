-- Administration: the functions behind the CLI (tally workspace/token/key …) and the workspace
-- settings page, so that both do exactly the same thing. None is granted to an API role; they
-- run as the database owner (the settings page's functions in settings.sql call them on behalf
-- of a signed-in member). Every change is recorded in tally.audit_log.

-- A workspace named by its id or (case-insensitively) its name.
CREATE OR REPLACE FUNCTION tally.find_workspace(ref text) RETURNS uuid
LANGUAGE sql STABLE
AS $$
  SELECT id FROM public.workspaces
   WHERE id = CASE WHEN ref ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN ref::uuid END
      OR lower(name) = lower(ref)
   LIMIT 1
$$;

CREATE OR REPLACE FUNCTION tally.create_workspace(ws_name text, ws_currency text, actor text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE ws uuid;
BEGIN
  INSERT INTO public.workspaces (name, currency) VALUES (ws_name, coalesce(ws_currency, 'USD')) RETURNING id INTO ws;
  INSERT INTO public.billing_accounts (workspace_id) VALUES (ws);
  INSERT INTO tally.audit_log (workspace_id, actor, action, details)
    VALUES (ws, actor, 'workspace.create', jsonb_build_object('name', ws_name));
  RETURN ws;
END
$$;

CREATE OR REPLACE FUNCTION tally.set_api_enabled(ws uuid, enabled boolean, actor text) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE public.workspaces SET api_enabled = enabled WHERE id = ws;
  IF NOT FOUND THEN
    RAISE no_data_found USING MESSAGE = 'unknown workspace';
  END IF;
  INSERT INTO tally.audit_log (workspace_id, actor, action, details)
    VALUES (ws, actor, CASE WHEN enabled THEN 'api.on' ELSE 'api.off' END, '{}');
END
$$;

-- The secret is made by the caller; only its SHA-256 arrives here.
CREATE OR REPLACE FUNCTION tally.create_token(ws uuid, token_scope text, token_label text, hash bytea, actor text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE token_id uuid;
BEGIN
  INSERT INTO public.api_tokens (workspace_id, scope, label, token_hash)
    VALUES (ws, token_scope, coalesce(token_label, ''), hash) RETURNING id INTO token_id;
  INSERT INTO tally.audit_log (workspace_id, actor, action, details)
    VALUES (ws, actor, 'token.create', jsonb_build_object('token_id', token_id, 'scope', token_scope, 'label', token_label));
  RETURN token_id;
END
$$;

-- Revokes a token of the given workspace (NULL: any workspace, for the operator's CLI).
CREATE OR REPLACE FUNCTION tally.revoke_token(token_id uuid, ws uuid, actor text) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE owner_ws uuid;
BEGIN
  UPDATE public.api_tokens SET revoked_at = now()
   WHERE id = token_id AND revoked_at IS NULL AND (ws IS NULL OR workspace_id = ws)
   RETURNING workspace_id INTO owner_ws;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO tally.audit_log (workspace_id, actor, action, details)
    VALUES (owner_ws, actor, 'token.revoke', jsonb_build_object('token_id', token_id));
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION tally.create_publishable_key(key_label text, hash bytea, actor text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE key_id uuid;
BEGIN
  INSERT INTO public.publishable_keys (label, key_hash) VALUES (coalesce(key_label, ''), hash) RETURNING id INTO key_id;
  INSERT INTO tally.audit_log (actor, action, details)
    VALUES (actor, 'key.create', jsonb_build_object('key_id', key_id, 'label', key_label));
  RETURN key_id;
END
$$;

CREATE OR REPLACE FUNCTION tally.revoke_publishable_key(key_id uuid, actor text) RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE public.publishable_keys SET revoked_at = now() WHERE id = key_id AND revoked_at IS NULL;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO tally.audit_log (actor, action, details)
    VALUES (actor, 'key.revoke', jsonb_build_object('key_id', key_id));
  RETURN true;
END
$$;

REVOKE EXECUTE ON FUNCTION tally.find_workspace(text), tally.create_workspace(text, text, text),
  tally.set_api_enabled(uuid, boolean, text), tally.create_token(uuid, text, text, bytea, text),
  tally.revoke_token(uuid, uuid, text), tally.create_publishable_key(text, bytea, text),
  tally.revoke_publishable_key(uuid, text) FROM PUBLIC;
