-- The activity log (public.activity, of the baseline migration): every insert, update and delete
-- of a workspace's records, written by a trigger in the transaction of the change, whatever made
-- it (/rest/v1, /api/v1, MCP, or SQL run in the database), with the record before and after and
-- who made it. public.undo_change() puts a record back as it was before a change.

-- The local shard of `schema_name.table_name` holding workspace `workspace` (any value for a
-- table without a distribution column), as a schema-qualified identifier for format('%s'), or
-- NULL: not a Citus node, a table Citus does not manage, or a shard this node does not hold.
--
-- A statement inside a PL/pgSQL function that names a table Citus manages is handed to Citus's
-- local execution: deparsed into a shard query and planned anew on every call, several times the
-- statement's own cost. The activity trigger writes the shard by EXECUTE instead when this node
-- holds it. The shard is found at every call, in Citus's own catalog, as Citus finds it (a shard
-- moved away by a rebalance is no longer local here); on plain Postgres the look-up ends at its
-- first line. A search_path of its own: a PL/pgSQL statement's cached plan holds for one
-- search_path, and its callers have different ones.
CREATE OR REPLACE FUNCTION tally.local_shard(schema_name text, table_name text, workspace uuid) RETURNS text
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
-- Executable by every role, unlike the other functions of schema tally: a trigger calls it as
-- whoever writes the row (an API role, the owner, a DBA's role), and it tells nothing that
-- Citus's catalog, readable by every role, does not.
GRANT EXECUTE ON FUNCTION tally.local_shard(text, text, uuid) TO PUBLIC;

-- The row trigger of a tracked table. Its arguments: the table's name (a shard on Citus has a
-- name of its own) and the key columns. The actor comes from the request's JWT claims, which
-- only the server sets (a token's id as `sub`, its `scope`, its label as `token_name`, the
-- `surface`); none: SQL run in the database. An update that changes nothing is not a change.
-- Its row goes into the local shard of activity that holds the workspace when this node has it
-- (on Citus, the worker where the changed row's shard is: the two are colocated).
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
REVOKE EXECUTE ON FUNCTION tally.record_activity() FROM PUBLIC;

-- Tracks a table's changes in the activity log (idempotent): it (re)makes the table's trigger.
-- citus.enable_unsafe_triggers: on a distributed table the trigger runs on the shard of the row
-- and writes the activity to the colocated shard of the same workspace.
CREATE OR REPLACE FUNCTION tally.track_activity(rel regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET citus.enable_unsafe_triggers = on
AS $$
DECLARE
  cols text;
BEGIN
  SELECT string_agg(quote_literal(a.attname), ', ' ORDER BY k.o) INTO cols
    FROM pg_index i
    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, o)
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
   WHERE i.indrelid = rel AND i.indisprimary AND a.attname <> 'workspace_id';
  IF cols IS NULL THEN
    RAISE EXCEPTION '% has no primary key besides workspace_id: its records cannot be named in the activity log', rel;
  END IF;
  EXECUTE format('DROP TRIGGER IF EXISTS zz_record_activity ON %s', rel);
  EXECUTE format('CREATE TRIGGER zz_record_activity AFTER INSERT OR UPDATE OR DELETE ON %s '
                 'FOR EACH ROW EXECUTE FUNCTION tally.record_activity(%L, %s)',
                 rel, (SELECT c.relname FROM pg_class c WHERE c.oid = rel), cols);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.track_activity(regclass) FROM PUBLIC;

-- The tracked tables: a new workspace table is added here.
SELECT tally.track_activity(t)
  FROM unnest(ARRAY['public.personal_transactions', 'public.contacts', 'public.funds',
                    'public.fund_transactions', 'public.fund_participants']::regclass[]) AS t;

-- Puts the records of a change back as they were before it, as the caller (RLS decides what it
-- may touch): a deleted record comes back with its id (with what its delete cascaded to), an
-- update is reverted, a created record is deleted. Refused (409) when a record changed again
-- since, naming that change; the undo is itself logged, each of its changes with undo_of.
-- Returns the activity the undo made.
CREATE OR REPLACE FUNCTION public.undo_change(activity_id uuid) RETURNS SETOF public.activity
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  target public.activity;
  step public.activity;
  later public.activity;
  steps uuid[];
  frontier uuid[];
  found_now uuid[];
  parent public.activity;
  fk record;
  rel regclass;
  match text;
  sets text;
  statement text;
  started timestamptz;
BEGIN
  SELECT * INTO target FROM public.activity a WHERE a.workspace_id = ws AND a.id = activity_id;
  IF NOT FOUND THEN
    RAISE SQLSTATE 'PT404' USING MESSAGE = format('No change %s in this workspace''s activity', activity_id),
      HINT = 'List the activity (GET /rest/v1/activity) for the id of the change to undo';
  END IF;
  -- A delete takes with it what its foreign keys' ON DELETE CASCADE deleted in the same
  -- transaction (a fund's transactions and participants), level by level: parents come back first.
  steps := ARRAY[target.id];
  frontier := steps;
  WHILE target.action = 'delete' AND cardinality(frontier) > 0 AND cardinality(steps) < 10000 LOOP
    found_now := '{}';
    FOR parent IN SELECT * FROM public.activity a WHERE a.workspace_id = ws AND a.id = ANY (frontier) LOOP
      FOR fk IN
        SELECT c.relname AS child,
               (SELECT jsonb_object_agg(ca.attname, parent.before -> pa.attname)
                  FROM unnest(f.conkey, f.confkey) AS k (ck, pk)
                  JOIN pg_attribute ca ON ca.attrelid = f.conrelid AND ca.attnum = k.ck
                  JOIN pg_attribute pa ON pa.attrelid = f.confrelid AND pa.attnum = k.pk) AS probe
          FROM pg_constraint f JOIN pg_class c ON c.oid = f.conrelid
         WHERE f.contype = 'f' AND f.confdeltype = 'c'
           AND f.confrelid = to_regclass(format('public.%I', parent.table_name))
           AND c.relnamespace = 'public'::regnamespace
      LOOP
        found_now := found_now || ARRAY(
          SELECT a.id FROM public.activity a
           WHERE a.workspace_id = ws AND a.table_name = fk.child AND a.action = 'delete'
             AND a.transaction_id = parent.transaction_id AND a.before @> fk.probe
             AND NOT a.id = ANY (steps));
      END LOOP;
    END LOOP;
    steps := steps || found_now;
    frontier := found_now;
  END LOOP;

  -- SET LOCAL, not set_config(): Citus sends it on to the worker whose trigger records the undo.
  EXECUTE format('SET LOCAL tally.undo_of = %L', target.id);
  started := clock_timestamp();
  FOR step IN
    SELECT * FROM public.activity a WHERE a.workspace_id = ws AND a.id = ANY (steps)
     ORDER BY array_position(steps, a.id)
  LOOP
    SELECT * INTO later FROM public.activity a
     WHERE a.workspace_id = ws AND a.table_name = step.table_name AND a.record_id = step.record_id
       AND a.at > step.at AND a.at < started
     ORDER BY a.at LIMIT 1;
    IF FOUND THEN
      RAISE SQLSTATE 'PT409' USING
        MESSAGE = format('Change %s cannot be undone: %s %s changed again since (change %s, %s at %s)',
                         target.id, step.table_name, step.record_id, later.id, later.action, later.at),
        HINT = format('Undo change %s first, or change the record by hand', later.id);
    END IF;
    -- Only a table of the schema whose changes are tracked, keyed by its primary key.
    SELECT c.oid::regclass INTO rel
      FROM pg_class c
     WHERE c.relnamespace = 'public'::regnamespace AND c.relname = step.table_name
       AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'zz_record_activity');
    IF rel IS NULL THEN
      RAISE SQLSTATE 'PT409' USING
        MESSAGE = format('Change %s cannot be undone: %s is no longer tracked', target.id, step.table_name);
    END IF;
    SELECT string_agg(format('t.%I = r.%I', a.attname, a.attname), ' AND ') INTO match
      FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
     WHERE i.indrelid = rel AND i.indisprimary;
    IF step.action = 'insert' THEN
      EXECUTE format('DELETE FROM %s AS t USING jsonb_populate_record(NULL::%s, $1) AS r WHERE %s', rel, rel, match)
        USING step.after;
    ELSIF step.action = 'update' THEN
      -- Only the columns the change changed: the others may not be the caller's to write.
      SELECT string_agg(format('%I = r.%I', k, k), ', ') INTO sets
        FROM jsonb_object_keys(step.before) AS k
       WHERE step.before -> k IS DISTINCT FROM step.after -> k;
      IF sets IS NOT NULL THEN
        EXECUTE format('UPDATE %s AS t SET %s FROM jsonb_populate_record(NULL::%s, $1) AS r WHERE %s',
                       rel, sets, rel, match) USING step.before;
      END IF;
    ELSE
      -- VALUES, not INSERT … SELECT: Citus routes it to the workspace's shard (it would run an
      -- INSERT … SELECT as a COPY, which RLS refuses).
      SELECT format('INSERT INTO %s (%s) VALUES (%s)', rel,
                    string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
                    string_agg(format('($1 ->> %L)::%s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                               ORDER BY a.attnum))
        INTO statement
        FROM pg_attribute a
       WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
         AND step.before ? a.attname;
      EXECUTE statement USING step.before;
    END IF;
  END LOOP;
  RETURN QUERY SELECT * FROM public.activity a WHERE a.workspace_id = ws AND a.undo_of = target.id AND a.at >= started
                ORDER BY a.at;
END
$$;
REVOKE EXECUTE ON FUNCTION public.undo_change(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.undo_change(uuid) TO api_write;

-- Keeps `days` of activity (the server runs it now and then: TALLY_ACTIVITY_RETENTION_DAYS). One
-- DELETE, not a data-modifying WITH, which has no distributed plan on Citus; GET DIAGNOSTICS
-- counts it on both.
CREATE OR REPLACE FUNCTION tally.prune_activity(days integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  gone bigint;
BEGIN
  DELETE FROM public.activity WHERE at < now() - make_interval(days => greatest(days, 1));
  GET DIAGNOSTICS gone = ROW_COUNT;
  RETURN gone;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.prune_activity(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.prune_activity(integer) TO authenticator;
