-- Administration: the functions behind the CLI (tally workspace/token/key …) and the workspace
-- settings page, so that both do exactly the same thing. None is granted to an API role; they
-- run as the database owner (the settings page's functions in settings.sql call them on behalf
-- of a signed-in member). Every change is recorded in tally.audit_log.

-- An entry of the audit log. A workspace keeps its `kept` newest entries (1,000), and so does an
-- actor its entries of no workspace (a member's own password changes, an operator's publishable
-- keys): each entry past them deletes the oldest in the same transaction, so creating and
-- revoking tokens, switching the API on and off or changing a password again and again grows
-- nothing without end, and one actor's entries never push out another's. The delete reads only
-- the workspace's (or the actor's) entries, 1,001 at most, by index, never the whole log.
CREATE OR REPLACE FUNCTION tally.audit(entry_ws uuid, entry_actor text, entry_action text, entry_details jsonb) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
  kept constant integer := 1000;
BEGIN
  INSERT INTO tally.audit_log (workspace_id, actor, action, details) VALUES (entry_ws, entry_actor, entry_action, entry_details);
  IF entry_ws IS NOT NULL THEN
    DELETE FROM tally.audit_log a
     WHERE a.workspace_id = entry_ws
       AND a.id IN (SELECT o.id FROM tally.audit_log o WHERE o.workspace_id = entry_ws
                     ORDER BY o.id DESC OFFSET kept);
  ELSE
    DELETE FROM tally.audit_log a
     WHERE a.workspace_id IS NULL AND a.actor = entry_actor
       AND a.id IN (SELECT o.id FROM tally.audit_log o WHERE o.workspace_id IS NULL AND o.actor = entry_actor
                     ORDER BY o.id DESC OFFSET kept);
  END IF;
END
$$;

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
  PERFORM tally.audit(ws, actor, 'workspace.create', jsonb_build_object('name', ws_name));
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
  PERFORM tally.audit(ws, actor, CASE WHEN enabled THEN 'api.on' ELSE 'api.off' END, '{}');
END
$$;

-- The secret is made by the caller; only its SHA-256 arrives here. A workspace has at most
-- active_per_workspace active tokens (50, as ACTIVE_TOKENS_PER_WORKSPACE in
-- gateway/admin/tokens.ts says in its refusal): each token has a rate limit of its own, so
-- minting tokens multiplied a workspace's rate, and its tokens grew without end. The count and
-- the insert hold a lock of the workspace's for the transaction, so concurrent mints are decided
-- one after the other and cannot pass the cap together. SQLSTATE 54000 (program_limit_exceeded)
-- is the refusal the callers answer as TLY205.
CREATE OR REPLACE FUNCTION tally.create_token(ws uuid, token_scope text, token_label text, hash bytea, actor text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
  token_id uuid;
  active_per_workspace constant integer := 50;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('tally.tokens:' || ws::text, 0));
  IF (SELECT count(*) FROM public.api_tokens t WHERE t.workspace_id = ws AND t.revoked_at IS NULL) >= active_per_workspace THEN
    RAISE SQLSTATE '54000' USING
      MESSAGE = format('The workspace has %s active tokens, the most it may have', active_per_workspace),
      HINT = 'Revoke a token to make room for a new one';
  END IF;
  INSERT INTO public.api_tokens (workspace_id, scope, label, token_hash)
    VALUES (ws, token_scope, coalesce(token_label, ''), hash) RETURNING id INTO token_id;
  PERFORM tally.audit(ws, actor, 'token.create', jsonb_build_object('token_id', token_id, 'scope', token_scope, 'label', token_label));
  RETURN token_id;
END
$$;

-- Revokes a token of the given workspace (NULL: any workspace, for the operator's CLI). A
-- workspace keeps its revoked_per_workspace most recently revoked tokens (50), to be listed on
-- its page; older revoked ones are deleted here, so revoking grows nothing without end. Nothing
-- needs their rows: no foreign key names a token, the activity log keeps each change's token
-- id and label, and a deleted token's secret matches no row, so it is refused as a revoked one is.
CREATE OR REPLACE FUNCTION tally.revoke_token(token_id uuid, ws uuid, actor text) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
  owner_ws uuid;
  revoked_per_workspace constant integer := 50;
BEGIN
  UPDATE public.api_tokens SET revoked_at = now()
   WHERE id = token_id AND revoked_at IS NULL AND (ws IS NULL OR workspace_id = ws)
   RETURNING workspace_id INTO owner_ws;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  DELETE FROM public.api_tokens t
   WHERE t.workspace_id = owner_ws
     AND t.id IN (SELECT o.id FROM public.api_tokens o WHERE o.workspace_id = owner_ws AND o.revoked_at IS NOT NULL
                   ORDER BY o.revoked_at DESC, o.id DESC OFFSET revoked_per_workspace);
  PERFORM tally.audit(owner_ws, actor, 'token.revoke', jsonb_build_object('token_id', token_id));
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION tally.create_publishable_key(key_label text, hash bytea, actor text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE key_id uuid;
BEGIN
  INSERT INTO public.publishable_keys (label, key_hash) VALUES (coalesce(key_label, ''), hash) RETURNING id INTO key_id;
  PERFORM tally.audit(NULL, actor, 'key.create', jsonb_build_object('key_id', key_id, 'label', key_label));
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
  PERFORM tally.audit(NULL, actor, 'key.revoke', jsonb_build_object('key_id', key_id));
  RETURN true;
END
$$;

REVOKE EXECUTE ON FUNCTION tally.audit(uuid, text, text, jsonb), tally.find_workspace(text), tally.create_workspace(text, text, text),
  tally.set_api_enabled(uuid, boolean, text), tally.create_token(uuid, text, text, bytea, text),
  tally.revoke_token(uuid, uuid, text), tally.create_publishable_key(text, bytea, text),
  tally.revoke_publishable_key(uuid, text) FROM PUBLIC;
