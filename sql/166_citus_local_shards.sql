-- Up Migration
-- On a Citus node, the two triggers every write runs read and write the local shard of a table
-- directly when the shard is on this node, instead of going through Citus.
--
-- A statement inside a PL/pgSQL function that names a table Citus manages is handed to Citus's
-- local execution: deparsed into a shard query and, but for a single-table read whose plan
-- Citus keeps, planned anew on every call, several times the statement's own cost (an
-- insert's category lookups and activity row on a worker). Here the statement runs on the
-- shard by EXECUTE, still parsed and planned at each call, but without Citus's deparsing and
-- executor around it.
--
-- The shard is found at every call, in Citus's own catalog, as Citus finds it: the shard that
-- holds the workspace (one shard for a reference or Citus local table), used only when this
-- node holds a placement of it, as Citus's local execution decides too. A shard moved away (a
-- rebalance) is no longer local here, and a table Citus does not manage has none: the function
-- then runs the statement as before, through Citus, so the answer never depends on where a
-- shard is. On plain Postgres the look-up ends at its first line (no Citus catalog) and the
-- statements are the ones of before.
--
-- The shard has the same rows, grants, row-level security, triggers and constraints as the
-- table (Citus made them so), and is read or written in the same transaction.

-- The local shard of `schema_name.table_name` holding workspace `workspace` (any value for a
-- table without a distribution column), as a schema-qualified identifier for format('%s'), or
-- NULL: not a Citus node, a table Citus does not manage, or a shard this node does not hold.
-- A search_path of its own: a PL/pgSQL statement's cached plan holds for one search_path, and
-- its callers have different ones (with its callers' path it was planned anew at every call).
CREATE FUNCTION tally.local_shard(schema_name text, table_name text, workspace uuid) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  rel regclass;
  shard bigint;
  target text;
BEGIN
  -- Citus's catalog exists in this database only where the extension is: on plain Postgres no
  -- statement naming it is reached (PL/pgSQL resolves names when it first runs a statement).
  IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
    RETURN NULL;
  END IF;
  rel := to_regclass(format('%I.%I', schema_name, table_name));
  SELECT s.shard INTO shard
    FROM pg_dist_partition p
   CROSS JOIN LATERAL (SELECT get_shard_id_for_distribution_column(p.logicalrelid, workspace) AS shard) s
   WHERE p.logicalrelid = rel
     AND EXISTS (SELECT FROM pg_dist_placement pl
                   JOIN pg_dist_local_group g ON g.groupid = pl.groupid
                  WHERE pl.shardid = s.shard);
  -- Citus names a shard after its table and id, shortened when that passes 63 bytes (then the
  -- statement goes through Citus).
  target := table_name || '_' || shard;
  IF shard IS NULL OR octet_length(target) > 63 THEN
    RETURN NULL;
  END IF;
  target := format('%I.%I', schema_name, target);
  RETURN CASE WHEN to_regclass(target) IS NOT NULL THEN target END;
END
$$;
-- Executable by every role, unlike the other functions of schema tally: the category trigger
-- calls it as whoever writes the row (an API role, the owner, a DBA's role), and it tells
-- nothing that Citus's catalog, readable by every role, does not.
GRANT EXECUTE ON FUNCTION tally.local_shard(text, text, uuid) TO PUBLIC;

-- The pre-request check (of 050) is the exception: it reads the token and then its workspace in
-- two single-table statements that Citus runs itself. On a coordinator api_tokens is a Citus
-- local table and workspaces a reference table, each with its shard there; a single-table read
-- by key of either is a router query whose distributed plan PL/pgSQL keeps, where by EXECUTE
-- on the local shards both statements were parsed and planned at each call, after two
-- look-ups of local_shard: on a 3-node cluster the coordinator spent 1.80-1.89 CPU ms per list
-- read that way, 1.48-1.60 with this (perf, after: the check is still a fifth of it, half of
-- that Citus's local execution). On plain Postgres the two statements are two index look-ups
-- instead of one join of them, each planned once per connection.
CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  -- The role the request runs as (SET LOCAL ROLE), not the definer this function runs as.
  api_role text := current_setting('role', true);
  -- Every JWT-borne request has claims (at least its role). None at all is the server's own
  -- read of the lookup lists: no workspace, so RLS shows it no tenant row.
  needs_token boolean := api_role IN ('api_read', 'api_write') AND claims <> '{}';
  token_id uuid;
  token record;
  enabled boolean;
BEGIN
  IF NOT needs_token AND claims ->> 'sub' IS NULL THEN
    RETURN; -- no JWT (anon): RLS lets no tenant row through
  END IF;
  IF claims ->> 'sub' IS NULL THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not name a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  IF needs_token AND jsonb_typeof(claims -> 'exp') IS DISTINCT FROM 'number' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token has no expiry',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  BEGIN
    token_id := (claims ->> 'sub')::uuid;
  EXCEPTION WHEN invalid_text_representation THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not belong to a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for a new access token';
  END;
  SELECT t.revoked_at, t.workspace_id, t.scope INTO token FROM api_tokens t WHERE t.id = token_id;
  IF FOUND THEN
    SELECT w.api_enabled INTO enabled FROM workspaces w WHERE w.id = token.workspace_id;
  END IF;
  -- No such token, or no such workspace (the join of before found no row): enabled is NULL.
  IF enabled IS NULL OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  -- A read token's access token runs as api_read only: a JWT claiming more is not one Tally made.
  IF api_role = 'api_write' AND token.scope <> 'write' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token''s role does not match the scope of its workspace token',
      HINT = 'Exchange the workspace token at /api/v1/token for an access token';
  END IF;
  IF NOT enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;

-- The category trigger (of 050): the lookups of a row that passes, on the local shards of the
-- reference tables categories and payment_methods on the worker that holds the row. A row that
-- fails is answered by the statements of before, which also list what is allowed.
CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
  allowed text;
  known boolean;
  shard text;
BEGIN
  IF NEW.category_id IS NOT NULL THEN
    shard := tally.local_shard('public', 'categories', NULL);
    IF shard IS NULL THEN
      SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
        FROM categories WHERE id = NEW.category_id;
    ELSE
      EXECUTE format('SELECT CASE $2 WHEN ''expenses'' THEN for_expenses ELSE for_funds END FROM %s WHERE id = $1', shard)
        INTO offered USING NEW.category_id, domain;
    END IF;
    IF offered IS NULL OR NOT offered THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed
        FROM categories WHERE CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END;
      RAISE check_violation USING
        MESSAGE = CASE WHEN offered IS NULL
          THEN format('category_id "%s" is not a known category', NEW.category_id)
          ELSE format('category_id "%s" is not offered to %s', NEW.category_id, domain) END,
        DETAIL = format('category_id must be one of: %s', allowed),
        HINT = format('Read the categories with for_%s = true', domain),
        COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
    END IF;
  END IF;
  IF NEW.method_id IS NOT NULL THEN
    shard := tally.local_shard('public', 'payment_methods', NULL);
    IF shard IS NULL THEN
      known := EXISTS (SELECT 1 FROM payment_methods WHERE id = NEW.method_id);
    ELSE
      EXECUTE format('SELECT true FROM %s WHERE id = $1', shard) INTO known USING NEW.method_id;
    END IF;
    IF known IS NOT TRUE THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed FROM payment_methods;
      RAISE check_violation USING
        MESSAGE = format('method_id "%s" is not a known payment method', NEW.method_id),
        DETAIL = format('method_id must be one of: %s', allowed),
        HINT = 'Read the payment methods',
        COLUMN = 'method_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_method_id_fkey';
    END IF;
  END IF;
  RETURN NEW; -- NOT NULL reports a missing value, naming the column
END
$$;

-- The activity trigger (of 164): its row goes into the local shard of activity that holds the
-- workspace, on the worker where the changed row's shard is (the two are colocated).
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
  ws uuid := (rec ->> 'workspace_id')::uuid;
  actor text := CASE WHEN claims ? 'member' THEN 'member' WHEN by_token THEN 'token' ELSE 'database' END;
  token_id uuid := CASE WHEN claims ->> 'sub' ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$'
                        THEN (claims ->> 'sub')::uuid END;
  token_name text := CASE WHEN by_token THEN left(claims ->> 'token_name', 200) END;
  scope text := CASE WHEN by_token THEN claims ->> 'scope' END;
  surface text := CASE WHEN claims ->> 'surface' IN ('rest', 'api', 'mcp', 'settings') THEN claims ->> 'surface'
                       WHEN by_token THEN 'rest' ELSE 'database' END;
  undo_of uuid := CASE WHEN undoing ~ '^[0-9a-fA-F-]{36}$' THEN undoing::uuid END;
  shard text;
BEGIN
  IF TG_OP = 'UPDATE' AND old_row = new_row THEN
    RETURN NULL;
  END IF;
  SELECT string_agg(rec ->> k, '/' ORDER BY o) INTO key
    FROM unnest(TG_ARGV[1:]) WITH ORDINALITY AS a (k, o);
  IF ws IS NOT NULL THEN
    shard := tally.local_shard('public', 'activity', ws);
  END IF;
  IF shard IS NULL THEN
    INSERT INTO public.activity (workspace_id, table_name, record_id, action, before, after, actor, token_id,
                                 token_name, scope, member, surface, undo_of)
    VALUES (ws, TG_ARGV[0], key, lower(TG_OP), old_row, new_row, actor, token_id, token_name, scope,
            claims ->> 'member', surface, undo_of);
  ELSE
    EXECUTE format('INSERT INTO %s (workspace_id, table_name, record_id, action, before, after, actor, token_id,'
                   '                token_name, scope, member, surface, undo_of)'
                   ' VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)', shard)
      USING ws, TG_ARGV[0], key, lower(TG_OP), old_row, new_row, actor, token_id, token_name, scope,
            claims ->> 'member', surface, undo_of;
  END IF;
  RETURN NULL;
END
$$;

-- Down Migration
-- The definitions of before (050, 164, with the search paths of 105).
CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  -- The role the request runs as (SET LOCAL ROLE), not the definer this function runs as.
  api_role text := current_setting('role', true);
  -- Every JWT-borne request has claims (at least its role). None at all is the server's own
  -- read of the lookup lists: no workspace, so RLS shows it no tenant row.
  needs_token boolean := api_role IN ('api_read', 'api_write') AND claims <> '{}';
  token_id uuid;
  token record;
BEGIN
  IF NOT needs_token AND claims ->> 'sub' IS NULL THEN
    RETURN; -- no JWT (anon): RLS lets no tenant row through
  END IF;
  IF claims ->> 'sub' IS NULL THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not name a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  IF needs_token AND jsonb_typeof(claims -> 'exp') IS DISTINCT FROM 'number' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token has no expiry',
      HINT = 'Exchange a workspace token at /api/v1/token for an access token';
  END IF;
  BEGIN
    token_id := (claims ->> 'sub')::uuid;
  EXCEPTION WHEN invalid_text_representation THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not belong to a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for a new access token';
  END;
  SELECT t.revoked_at, t.workspace_id, t.scope, w.api_enabled INTO token
    FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
   WHERE t.id = token_id;
  IF NOT FOUND OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  -- A read token's access token runs as api_read only: a JWT claiming more is not one Tally made.
  IF api_role = 'api_write' AND token.scope <> 'write' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token''s role does not match the scope of its workspace token',
      HINT = 'Exchange the workspace token at /api/v1/token for an access token';
  END IF;
  IF NOT token.api_enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
  allowed text;
BEGIN
  IF NEW.category_id IS NOT NULL THEN
    SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
      FROM categories WHERE id = NEW.category_id;
    IF offered IS NULL OR NOT offered THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed
        FROM categories WHERE CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END;
      RAISE check_violation USING
        MESSAGE = CASE WHEN offered IS NULL
          THEN format('category_id "%s" is not a known category', NEW.category_id)
          ELSE format('category_id "%s" is not offered to %s', NEW.category_id, domain) END,
        DETAIL = format('category_id must be one of: %s', allowed),
        HINT = format('Read the categories with for_%s = true', domain),
        COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
    END IF;
  END IF;
  IF NEW.method_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM payment_methods WHERE id = NEW.method_id) THEN
    SELECT string_agg(id, ', ' ORDER BY id) INTO allowed FROM payment_methods;
    RAISE check_violation USING
      MESSAGE = format('method_id "%s" is not a known payment method', NEW.method_id),
      DETAIL = format('method_id must be one of: %s', allowed),
      HINT = 'Read the payment methods',
      COLUMN = 'method_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_method_id_fkey';
  END IF;
  RETURN NEW; -- NOT NULL reports a missing value, naming the column
END
$$;

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

DROP FUNCTION IF EXISTS tally.local_shard(text, text, uuid);
