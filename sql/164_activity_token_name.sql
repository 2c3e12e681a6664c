-- Up Migration
-- The activity log names the token that made a change (its label, beside its id and scope), and
-- the settings page shows a workspace's latest changes. The trigger cannot look the label up:
-- on Citus it runs on the worker that holds the record, which has no api_tokens. The server puts
-- the label in the claims it signs (`token_name`, read with tally.token_label when a token is
-- exchanged or used by MCP), and the trigger copies it from there.
ALTER TABLE public.activity ADD COLUMN token_name text;
COMMENT ON COLUMN public.activity.token_name IS 'The label of the workspace token that made the change, as it was then';

CREATE OR REPLACE FUNCTION tally.record_activity() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claims jsonb := coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb;
  old_row jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END;
  new_row jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END;
  rec jsonb := coalesce(new_row, old_row);
  key text;
  undoing text := nullif(current_setting('tally.undo_of', true), '');
  by_token boolean := claims ? 'role' AND claims ? 'workspace_id';
BEGIN
  IF TG_OP = 'UPDATE' AND old_row = new_row THEN
    RETURN NULL;
  END IF;
  SELECT string_agg(rec ->> k, '/' ORDER BY o) INTO key
    FROM unnest(TG_ARGV[1:]) WITH ORDINALITY AS a (k, o);
  INSERT INTO public.activity (workspace_id, table_name, record_id, action, before, after, actor, token_id,
                               token_name, scope, member, surface, undo_of)
  VALUES ((rec ->> 'workspace_id')::uuid, TG_ARGV[0], key, lower(TG_OP), old_row, new_row,
          CASE WHEN claims ? 'member' THEN 'member' WHEN by_token THEN 'token' ELSE 'database' END,
          CASE WHEN claims ->> 'sub' ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$'
               THEN (claims ->> 'sub')::uuid END,
          CASE WHEN by_token THEN left(claims ->> 'token_name', 200) END,
          CASE WHEN by_token THEN claims ->> 'scope' END,
          claims ->> 'member',
          CASE WHEN claims ->> 'surface' IN ('rest', 'api', 'mcp', 'settings') THEN claims ->> 'surface'
               WHEN by_token THEN 'rest' ELSE 'database' END,
          CASE WHEN undoing ~ '^[0-9a-fA-F-]{36}$' THEN undoing::uuid END);
  RETURN NULL;
END
$$;

-- The label of a workspace token, for the claims the server signs.
CREATE FUNCTION tally.token_label(token uuid) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT t.label FROM public.api_tokens t WHERE t.id = token $$;
REVOKE EXECUTE ON FUNCTION tally.token_label(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.token_label(uuid) TO authenticator;

-- The latest changes of workspace `ws` for its settings page: for a session of one of its
-- members, else none. The membership is read first, on the coordinator; the activity then by the
-- workspace, on its shard.
CREATE FUNCTION tally.settings_activity(session_hash bytea, ws uuid, max integer)
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
REVOKE EXECUTE ON FUNCTION tally.settings_activity(bytea, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.settings_activity(bytea, uuid, integer) TO authenticator;

-- Down Migration
DROP FUNCTION IF EXISTS tally.settings_activity(bytea, uuid, integer);
DROP FUNCTION IF EXISTS tally.token_label(uuid);
CREATE OR REPLACE FUNCTION tally.record_activity() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claims jsonb := coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb;
  old_row jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END;
  new_row jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END;
  rec jsonb := coalesce(new_row, old_row);
  key text;
  undoing text := nullif(current_setting('tally.undo_of', true), '');
  by_token boolean := claims ? 'role' AND claims ? 'workspace_id';
BEGIN
  IF TG_OP = 'UPDATE' AND old_row = new_row THEN
    RETURN NULL;
  END IF;
  SELECT string_agg(rec ->> k, '/' ORDER BY o) INTO key
    FROM unnest(TG_ARGV[1:]) WITH ORDINALITY AS a (k, o);
  INSERT INTO public.activity (workspace_id, table_name, record_id, action, before, after, actor, token_id,
                               scope, member, surface, undo_of)
  VALUES ((rec ->> 'workspace_id')::uuid, TG_ARGV[0], key, lower(TG_OP), old_row, new_row,
          CASE WHEN claims ? 'member' THEN 'member' WHEN by_token THEN 'token' ELSE 'database' END,
          CASE WHEN claims ->> 'sub' ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$'
               THEN (claims ->> 'sub')::uuid END,
          CASE WHEN by_token THEN claims ->> 'scope' END,
          claims ->> 'member',
          CASE WHEN claims ->> 'surface' IN ('rest', 'api', 'mcp', 'settings') THEN claims ->> 'surface'
               WHEN by_token THEN 'rest' ELSE 'database' END,
          CASE WHEN undoing ~ '^[0-9a-fA-F-]{36}$' THEN undoing::uuid END);
  RETURN NULL;
END
$$;
ALTER TABLE public.activity DROP COLUMN IF EXISTS token_name;
