-- Up Migration
-- On a Citus coordinator, the pre-request check and the category trigger read the shards of
-- the tables they look up by name, in plain statements whose plans PL/pgSQL keeps.
--
-- Those tables (api_tokens, a Citus local table; workspaces, categories, payment_methods,
-- reference tables) have one shard each, with the same id on every node that holds it, and it
-- never moves: a rebalance moves only the shards of distributed tables. A statement naming the
-- table itself is handed to Citus, which plans it anew on every call (it refuses generic plans
-- for them) and runs it through its local execution; by EXECUTE on the shard (sql/166) it is
-- parsed and planned at every call after a look-up of the shard. Measured on a 3-node cluster
-- (2026-11-27, one loaded two-core machine): the check's two reads cost 0.09-0.10 ms through
-- Citus, 0.009 ms on the shards by name; a category read by EXECUTE after local_shard 0.07 ms,
-- by name 0.005 ms.
--
-- tally.bind_shards() writes both functions with the shards' names when this node holds them
-- (found once, in Citus's catalog), and with the tables' names otherwise (plain Postgres, where
-- the statements are those of before). It runs here and after every `tally migrate` (the
-- placement may be new). A node without the shard (a worker, for api_tokens; a node added
-- later, until the reference tables are copied to it) finds no such table (to_regclass, at
-- each call) and reads the table through Citus, as before. The two functions are defined in
-- bind_shards() only: a later change to either goes there, or the next migrate undoes it.

-- The one shard of a Citus table that has one (a reference or Citus local table), when this
-- node holds it, as a schema-qualified name; NULL on plain Postgres and for any other table.
CREATE FUNCTION tally.bound_shard(rel text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  shard text;
BEGIN
  -- PL/pgSQL resolves names when it first runs a statement: on plain Postgres no statement
  -- naming Citus's catalog is reached.
  IF to_regclass('pg_catalog.pg_dist_partition') IS NULL OR to_regclass(rel) IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT format('%I.%I', n.nspname, c.relname || '_' || s.shardid) INTO shard
    FROM pg_dist_partition p
    JOIN pg_dist_shard s ON s.logicalrelid = p.logicalrelid
    JOIN pg_class c ON c.oid = p.logicalrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE p.logicalrelid = to_regclass(rel) AND p.partmethod = 'n'
     -- Citus shortens a shard's name past 63 bytes: then the table itself is read.
     AND octet_length(c.relname || '_' || s.shardid) <= 63
     AND EXISTS (SELECT FROM pg_dist_placement pl JOIN pg_dist_local_group g ON g.groupid = pl.groupid
                  WHERE pl.shardid = s.shardid);
  RETURN CASE WHEN to_regclass(shard) IS NOT NULL THEN shard END;
END
$$;

CREATE FUNCTION tally.bind_shards() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $bind$
DECLARE
  tokens text := tally.bound_shard('public.api_tokens');
  spaces text := tally.bound_shard('public.workspaces');
  categories text := tally.bound_shard('public.categories');
  methods text := tally.bound_shard('public.payment_methods');
  -- The check's reads of a token and its workspace, from %1$s and %2$s.
  check_reads text := $r$
    SELECT t.revoked_at, t.workspace_id, t.scope INTO token FROM %1$s t WHERE t.id = token_id;
    IF FOUND THEN
      SELECT w.api_enabled INTO enabled FROM %2$s w WHERE w.id = token.workspace_id;
    END IF;$r$;
  category_read text := $r$
      SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
        FROM %s WHERE id = NEW.category_id;$r$;
  method_read text := $r$
      known := EXISTS (SELECT 1 FROM %s WHERE id = NEW.method_id);$r$;
  -- A read of the shard while this node holds it, else of the table (through Citus).
  bound text := $r$
    IF to_regclass(%L) IS NOT NULL%s THEN%s
    ELSE%s
    END IF;$r$;
BEGIN
  EXECUTE format($f$
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
  END;%s
  -- No such token, or no such workspace: enabled is NULL.
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
$$$f$,
    CASE WHEN tokens IS NULL OR spaces IS NULL THEN format(check_reads, 'api_tokens', 'workspaces')
         ELSE format(bound, tokens, format(' AND to_regclass(%L) IS NOT NULL', spaces),
                     format(check_reads, tokens, spaces), format(check_reads, 'api_tokens', 'workspaces')) END);

  -- The lookups of a row that passes; a row that fails is answered by the statements that also
  -- list what is allowed.
  EXECUTE format($f$
  CREATE OR REPLACE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
  allowed text;
  known boolean;
BEGIN
  IF NEW.category_id IS NOT NULL THEN%s
    IF offered IS NULL OR NOT offered THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed
        FROM categories WHERE CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END;
      RAISE check_violation USING
        MESSAGE = CASE WHEN offered IS NULL
          THEN format('category_id "%%s" is not a known category', NEW.category_id)
          ELSE format('category_id "%%s" is not offered to %%s', NEW.category_id, domain) END,
        DETAIL = format('category_id must be one of: %%s', allowed),
        HINT = format('Read the categories with for_%%s = true', domain),
        COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
    END IF;
  END IF;
  IF NEW.method_id IS NOT NULL THEN%s
    IF NOT known THEN
      SELECT string_agg(id, ', ' ORDER BY id) INTO allowed FROM payment_methods;
      RAISE check_violation USING
        MESSAGE = format('method_id "%%s" is not a known payment method', NEW.method_id),
        DETAIL = format('method_id must be one of: %%s', allowed),
        HINT = 'Read the payment methods',
        COLUMN = 'method_id', TABLE = TG_TABLE_NAME,
        CONSTRAINT = TG_TABLE_NAME || '_method_id_fkey';
    END IF;
  END IF;
  RETURN NEW; -- NOT NULL reports a missing value, naming the column
END
$$$f$,
    CASE WHEN categories IS NULL THEN format(category_read, 'categories')
         ELSE format(bound, categories, '', format(category_read, categories), format(category_read, 'categories')) END,
    CASE WHEN methods IS NULL THEN format(method_read, 'payment_methods')
         ELSE format(bound, methods, '', format(method_read, methods), format(method_read, 'payment_methods')) END);
END
$bind$;

REVOKE EXECUTE ON FUNCTION tally.bound_shard(text), tally.bind_shards() FROM PUBLIC;

SELECT tally.bind_shards();

-- Down Migration
-- The definitions of 166 (through Citus, or by EXECUTE on the local shards).
CREATE OR REPLACE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  api_role text := current_setting('role', true);
  needs_token boolean := api_role IN ('api_read', 'api_write') AND claims <> '{}';
  token_id uuid;
  token record;
  enabled boolean;
BEGIN
  IF NOT needs_token AND claims ->> 'sub' IS NULL THEN
    RETURN;
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
  IF enabled IS NULL OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
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
  RETURN NEW;
END
$$;

DROP FUNCTION IF EXISTS tally.bind_shards(), tally.bound_shard(text);
