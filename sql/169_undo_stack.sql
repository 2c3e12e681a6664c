-- Up Migration
-- Undo as a stack, and changes a write can name from its own transaction.
--
-- Every change logged by one request shares a `request_id`: a random id the server puts in
-- the claims of each transaction that may write (claim `request_id`, SET LOCAL, so every Citus
-- node sees it), or one made for the transaction when SQL runs in the database. It replaces
-- `transaction_id`, Postgres's transaction counter, which one workspace could read the gaps of
-- to count another's requests. `cascaded` marks a change made by a foreign key's cascade (or
-- another trigger), not by the statement itself: a fund's delete is one change, and its
-- transactions' deletes ride along with it. `bytes` is what the entry takes, for the budget.
--
-- An update's entry holds what changed (the changed fields, before and after), not the whole
-- row twice; an insert keeps the row it made and a delete the row it removed, so undo works.
--
-- tally.report_changes() runs last in a request that may write (the engine calls it before it
-- reads the response settings): it names the changes the request made in its response headers
-- (Tally-Changes, Tally-Activity-Id, Tally-Request-Id), read from the request's own transaction.
--
-- Undo (public.undo_changes, and undo_change for one change) treats the log as a stack: a change
-- and its undo cancel out when deciding whether a record changed since, so undoing a record's
-- changes newest-first always works, and a refusal names the newest change that is in the way
-- and not undone, so following its advice converges.
ALTER TABLE public.activity ADD COLUMN request_id uuid;
ALTER TABLE public.activity ADD COLUMN cascaded boolean NOT NULL DEFAULT false;
ALTER TABLE public.activity ADD COLUMN bytes integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN public.activity.request_id IS 'The request (transaction) that made the change; its other changes share it';
COMMENT ON COLUMN public.activity.cascaded IS 'Made by a cascade of another change of the request (a fund''s delete took it), not by the request itself';
COMMENT ON COLUMN public.activity.bytes IS 'What the entry takes in the log, counted against the workspace''s budget';

-- A jsonb object of the fields whose values differ between two rows: `side` 'before' gives the
-- old values, 'after' the new ones; NULL when nothing differs.
CREATE FUNCTION tally.changed_fields(old_row jsonb, new_row jsonb, side text) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_object_agg(n.key, CASE WHEN side = 'before' THEN o.value ELSE n.value END)
    FROM jsonb_each(new_row) n LEFT JOIN jsonb_each(old_row) o ON o.key = n.key
   WHERE o.value IS DISTINCT FROM n.value
$$;
GRANT EXECUTE ON FUNCTION tally.changed_fields(jsonb, jsonb, text) TO PUBLIC;

-- The entries of before: their transaction_id becomes a request id that tells nothing of the
-- counter (a digest of it with a salt made here and kept nowhere), and an update keeps what it changed.
DO $$
BEGIN
  EXECUTE format('UPDATE public.activity SET request_id = md5(%L || transaction_id::text)::uuid', gen_random_uuid());
END
$$;
UPDATE public.activity
   SET before = tally.changed_fields(before, after, 'before'), after = tally.changed_fields(before, after, 'after')
 WHERE action = 'update' AND before IS NOT NULL AND after IS NOT NULL;
UPDATE public.activity
   SET bytes = octet_length(coalesce(before::text, '')) + octet_length(coalesce(after::text, '')) + 160;
-- A cascade's deletes of before: a fund's transactions and participants deleted with it.
UPDATE public.activity c SET cascaded = true
 WHERE c.action = 'delete' AND c.table_name IN ('fund_transactions', 'fund_participants')
   AND EXISTS (SELECT 1 FROM public.activity p
                WHERE p.workspace_id = c.workspace_id AND p.request_id = c.request_id AND p.action = 'delete'
                  AND ((p.table_name = 'funds' AND p.record_id = c.before ->> 'fund_id')
                       OR (p.table_name = 'contacts' AND p.record_id = c.before ->> 'contact_id')));
ALTER TABLE public.activity DROP COLUMN transaction_id;
CREATE INDEX activity_request_idx ON public.activity (workspace_id, request_id);

-- The request a change belongs to: the claim the server sets, else one made for this
-- transaction (SQL run in the database), kept in a transaction-local setting.
CREATE FUNCTION tally.request_id(claims jsonb) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  made text := claims ->> 'request_id';
BEGIN
  IF made ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$' THEN
    RETURN made::uuid;
  END IF;
  made := nullif(current_setting('tally.request_id', true), '');
  IF made IS NULL THEN
    made := gen_random_uuid()::text;
    PERFORM set_config('tally.request_id', made, true);
  END IF;
  RETURN made::uuid;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.request_id(jsonb) FROM PUBLIC;

-- Whether a delete was made by a foreign key's cascade: the parent it references was deleted in
-- the same request, its change logged already (Postgres fires a cascade's row triggers after
-- those of the delete that caused it). `tbl` is the table's name (a shard's trigger passes its
-- table's); `log` the activity shard of this node, or NULL for the table itself.
CREATE FUNCTION tally.cascaded_delete(ws uuid, request uuid, tbl text, old_row jsonb, log text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  fk record;
  parent_key text;
  found boolean;
BEGIN
  FOR fk IN
    SELECT f.conkey, f.confkey, f.confrelid, p.relname AS parent
      FROM pg_constraint f JOIN pg_class p ON p.oid = f.confrelid
     WHERE f.conrelid = to_regclass(format('public.%I', tbl)) AND f.contype = 'f' AND f.confdeltype = 'c'
  LOOP
    -- The parent's record_id: its key's columns but workspace_id, as the child's columns hold them.
    SELECT string_agg(old_row ->> ca.attname, '/' ORDER BY k.o), bool_and(ca.attname IS NOT NULL)
      INTO parent_key, found
      FROM pg_index i
      CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, o)
      JOIN pg_attribute pa ON pa.attrelid = i.indrelid AND pa.attnum = k.attnum
      LEFT JOIN LATERAL (SELECT m.ck FROM unnest(fk.conkey, fk.confkey) AS m (ck, pk) WHERE m.pk = k.attnum) m ON true
      LEFT JOIN pg_attribute ca ON ca.attrelid = to_regclass(format('public.%I', tbl)) AND ca.attnum = m.ck
     WHERE i.indrelid = fk.confrelid AND i.indisprimary AND pa.attname <> 'workspace_id';
    CONTINUE WHEN parent_key IS NULL OR NOT found;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s a WHERE a.workspace_id = $1 AND a.request_id = $2'
                   ' AND a.table_name = $3 AND a.action = ''delete'' AND a.record_id = $4)',
                   coalesce(log, 'public.activity'))
      INTO found USING ws, request, fk.parent, parent_key;
    IF found THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.cascaded_delete(uuid, uuid, text, jsonb, text) FROM PUBLIC;

-- The activity trigger: what changed, by whom, in which request. Its row goes into the local
-- shard of activity that holds the workspace when this node has it (sql/166).
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
  cascaded boolean := false;
  request uuid;
  bytes integer;
  shard text;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    old_row := tally.changed_fields(old_row, new_row, 'before');
    IF old_row IS NULL THEN
      RETURN NULL; -- an update that changes nothing is not a change
    END IF;
    new_row := tally.changed_fields(to_jsonb(OLD), new_row, 'after');
  END IF;
  SELECT string_agg(rec ->> k, '/' ORDER BY o) INTO key
    FROM unnest(TG_ARGV[1:]) WITH ORDINALITY AS a (k, o);
  request := tally.request_id(claims);
  -- As text, what a reader of the log gets, plus the entry's other columns.
  bytes := octet_length(coalesce(old_row::text, '')) + octet_length(coalesce(new_row::text, '')) + 160;
  IF ws IS NOT NULL THEN
    shard := tally.local_shard('public', 'activity', ws);
  END IF;
  -- A delete a cascade made rides along with the change that caused it (a fund's delete).
  IF TG_OP = 'DELETE' THEN
    cascaded := tally.cascaded_delete(ws, request, TG_ARGV[0], old_row, shard);
  END IF;
  IF shard IS NULL THEN
    INSERT INTO public.activity (workspace_id, table_name, record_id, action, before, after, actor, token_id,
                                 token_name, scope, member, surface, undo_of, request_id, cascaded, bytes)
    VALUES (ws, TG_ARGV[0], key, lower(TG_OP), old_row, new_row, actor, token_id, token_name, scope,
            claims ->> 'member', surface, undo_of, request, cascaded, bytes);
  ELSE
    EXECUTE format('INSERT INTO %s (workspace_id, table_name, record_id, action, before, after, actor, token_id,'
                   '                token_name, scope, member, surface, undo_of, request_id, cascaded, bytes)'
                   ' VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)', shard)
      USING ws, TG_ARGV[0], key, lower(TG_OP), old_row, new_row, actor, token_id, token_name, scope,
            claims ->> 'member', surface, undo_of, request, cascaded, bytes;
  END IF;
  RETURN NULL;
END
$$;

-- Names the changes of this request in its response headers: Tally-Changes (how many records
-- it changed, a cascade's rows not counted: 0 when it changed nothing), Tally-Activity-Id (their
-- ids, oldest first, up to 100) and Tally-Request-Id (what they share). Run as the caller, in
-- the request's transaction (on Citus a router read of the workspace's shard, on the
-- connection that wrote it); it appends to the headers the request's SQL may have set.
CREATE FUNCTION tally.report_changes() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  ws uuid := tally.current_workspace_id();
  request uuid;
  made integer;
  ids text;
  headers text := coalesce(current_setting('response.headers', true), '');
BEGIN
  IF ws IS NULL OR NOT coalesce(claims ->> 'request_id' ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$', false) THEN
    RETURN;
  END IF;
  request := (claims ->> 'request_id')::uuid;
  SELECT count(*), string_agg(a.id::text, ', ' ORDER BY a.at, a.id) FILTER (WHERE a.n <= 100)
    INTO made, ids
    FROM (SELECT x.id, x.at, row_number() OVER (ORDER BY x.at, x.id) AS n
            FROM public.activity x
           WHERE x.workspace_id = ws AND x.request_id = request AND NOT x.cascaded) a;
  IF trim(headers) = '' THEN
    headers := '[]';
  END IF;
  PERFORM set_config('response.headers',
    (headers::jsonb || jsonb_build_array(jsonb_build_object('Tally-Changes', made::text))
       || CASE WHEN made > 0 THEN jsonb_build_array(jsonb_build_object('Tally-Request-Id', request::text)) ELSE '[]' END
       || CASE WHEN ids IS NOT NULL THEN jsonb_build_array(jsonb_build_object('Tally-Activity-Id', ids)) ELSE '[]' END)::text,
    true);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.report_changes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.report_changes() TO anon, api_read, api_write;

-- The newest change of a record after `change` that still stands in the way of undoing it, or
-- NULL: the record's later changes are read newest-first; one that a later standing undo undid
-- does not stand, and an undo that stands cancels out with the change it undid when that change
-- is later than `change` too. Any other standing later change is in the way. `undone` names
-- changes to take as undone already (a preview's earlier steps). When `change` itself was
-- undone by a standing undo, that undo is answered.
CREATE FUNCTION tally.undo_blocker(change public.activity, undone uuid[]) RETURNS public.activity
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  later uuid[];
  x public.activity;
  gone uuid[] := coalesce(undone, '{}');
BEGIN
  -- Ids and rows column by column, never a row of the table as a value: on Citus a shard's row
  -- has a type of its own.
  later := ARRAY(SELECT a.id FROM public.activity a
                  WHERE a.workspace_id = change.workspace_id AND a.table_name = change.table_name
                    AND a.record_id = change.record_id AND (a.at, a.id) > (change.at, change.id) AND a.at >= change.at);
  FOR x IN
    SELECT * FROM public.activity a
     WHERE a.workspace_id = change.workspace_id AND a.table_name = change.table_name
       AND a.record_id = change.record_id AND (a.at, a.id) > (change.at, change.id) AND a.at >= change.at
     ORDER BY a.at DESC, a.id DESC
  LOOP
    CONTINUE WHEN x.id = ANY (gone);
    IF x.undo_of IS NULL THEN
      RETURN x;
    END IF;
    gone := gone || x.undo_of;
    IF x.undo_of = change.id THEN
      RETURN x; -- the change itself was undone
    END IF;
    IF NOT x.undo_of = ANY (later) THEN
      RETURN x; -- it undid a change of before this one
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.undo_blocker(public.activity, uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.undo_blocker(public.activity, uuid[]) TO api_write;

-- A change of the workspace's log by id (NULL when there is none).
CREATE FUNCTION tally.change_of(ws uuid, change uuid) RETURNS public.activity
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  found public.activity;
BEGIN
  SELECT * INTO found FROM public.activity a WHERE a.workspace_id = ws AND a.id = change;
  RETURN found;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.change_of(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.change_of(uuid, uuid) TO api_write;

-- The records of a change, in the order to put them back (their changes' ids): the change, then
-- for a delete what its foreign keys' cascades deleted in the same request, level by level
-- (parents first).
CREATE FUNCTION tally.undo_steps(target public.activity) RETURNS uuid[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := target.workspace_id;
  steps uuid[] := ARRAY[target.id];
  frontier uuid[] := ARRAY[target.id];
  found_now uuid[];
  parent public.activity;
  fk record;
BEGIN
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
           WHERE a.workspace_id = ws AND a.request_id = parent.request_id AND a.table_name = fk.child
             AND a.action = 'delete' AND a.cascaded AND a.before @> fk.probe AND NOT a.id = ANY (steps)
           ORDER BY a.at, a.id);
      END LOOP;
    END LOOP;
    steps := steps || found_now;
    frontier := found_now;
  END LOOP;
  RETURN steps;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.undo_steps(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.undo_steps(public.activity) TO api_write;

-- Undoing a create must not take other records with it: when the delete that undoes it cascaded
-- (a fund with transactions recorded since), the undo is refused, naming the newest standing
-- change of those records, whose undo (newest first) lets this one through.
CREATE FUNCTION tally.refuse_cascade(step public.activity) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := step.workspace_id;
  taken uuid[];
  child public.activity;
  first public.activity;
  newest public.activity;
  blocker public.activity;
BEGIN
  taken := ARRAY(SELECT a.id FROM public.activity a WHERE a.workspace_id = ws AND a.undo_of = step.id AND a.cascaded);
  IF cardinality(taken) = 0 THEN
    RETURN;
  END IF;
  FOR child IN SELECT * FROM public.activity a WHERE a.workspace_id = ws AND a.id = ANY (taken) LOOP
    -- From the record's first change on, the cascade's own deletes left out.
    SELECT * INTO first FROM public.activity c
     WHERE c.workspace_id = ws AND c.table_name = child.table_name AND c.record_id = child.record_id
       AND NOT c.id = ANY (taken)
     ORDER BY c.at, c.id LIMIT 1;
    blocker := tally.undo_blocker(first, taken);
    IF blocker.id IS NULL THEN
      blocker := first;
    END IF;
    IF newest.id IS NULL OR (blocker.at, blocker.id) > (newest.at, newest.id) THEN
      newest := blocker;
    END IF;
  END LOOP;
  RAISE SQLSTATE 'PT409' USING
    MESSAGE = format('Change %s cannot be undone: removing %s %s would also delete %s record(s) made since (change %s, %s of %s %s at %s)',
                     step.id, step.table_name, step.record_id, cardinality(taken), newest.id, newest.action,
                     newest.table_name, newest.record_id, newest.at),
    HINT = format('Undo change %s first, or change the record by hand', newest.id);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.refuse_cascade(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.refuse_cascade(public.activity) TO api_write;

-- Where a change's record is: its table (one of the schema whose changes are tracked), the
-- condition that finds it (t, the table, against p, the record's key, and $2 the workspace, a
-- value of the statement, by which Citus routes it to the workspace's shard), and its key, as
-- a jsonb object for jsonb_populate_record (record_id is the key's columns but workspace_id,
-- joined by '/', as the trigger wrote it).
CREATE FUNCTION tally.record_of(step public.activity, OUT rel regclass, OUT match text, OUT probe jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  keys text[];
BEGIN
  SELECT c.oid::regclass INTO rel
    FROM pg_class c
   WHERE c.relnamespace = 'public'::regnamespace AND c.relname = step.table_name
     AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'zz_record_activity');
  IF rel IS NULL THEN
    RAISE SQLSTATE 'PT409' USING
      MESSAGE = format('Change %s cannot be undone: %s is no longer tracked', step.id, step.table_name);
  END IF;
  SELECT array_agg(a.attname::text ORDER BY k.o) INTO keys
    FROM pg_index i
    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, o)
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
   WHERE i.indrelid = rel AND i.indisprimary AND a.attname <> 'workspace_id';
  SELECT jsonb_object_agg(k, split_part(step.record_id, '/', o::integer)) INTO probe
    FROM unnest(keys) WITH ORDINALITY AS x (k, o);
  SELECT 't.workspace_id = $2 AND ' || string_agg(format('t.%I = p.%I', k, k), ' AND ') INTO match
    FROM unnest(keys) AS k;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.record_of(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.record_of(public.activity) TO api_write;

-- Locks the record of a change (when it exists) until the undo's transaction ends, before the
-- log is read for what stands in its way: a write of the record that comes meanwhile waits, and
-- one that came first is in the log by then. Without it, an update committed between the read
-- and the undo's own write would be overwritten and never seen.
CREATE FUNCTION tally.lock_record(step public.activity) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record := tally.record_of(step);
BEGIN
  EXECUTE format('SELECT 1 FROM %s AS t, jsonb_populate_record(NULL::%s, $1) AS p WHERE %s FOR UPDATE OF t',
                 r.rel, r.rel, r.match)
    USING r.probe, step.workspace_id;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.lock_record(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.lock_record(public.activity) TO api_write;

-- Puts one record back as it was before `step`, as the caller (RLS decides what it may touch),
-- the undo logged with undo_of = the step. Answers the undo's own change.
CREATE FUNCTION tally.undo_step(step public.activity) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record := tally.record_of(step);
  sets text;
  statement text;
  made uuid;
BEGIN
  EXECUTE format('SET LOCAL tally.undo_of = %L', step.id);
  IF step.action = 'insert' THEN
    EXECUTE format('DELETE FROM %s AS t USING jsonb_populate_record(NULL::%s, $1) AS p WHERE %s', r.rel, r.rel, r.match)
      USING r.probe, step.workspace_id;
    PERFORM tally.refuse_cascade(step);
  ELSIF step.action = 'update' THEN
    -- Only the columns the change changed: the others may not be the caller's to write.
    SELECT string_agg(format('%I = v.%I', k, k), ', ') INTO sets FROM jsonb_object_keys(step.before) AS k;
    EXECUTE format('UPDATE %s AS t SET %s FROM jsonb_populate_record(NULL::%s, $1) AS p, '
                   'jsonb_populate_record(NULL::%s, $3) AS v WHERE %s', r.rel, sets, r.rel, r.rel, r.match)
      USING r.probe, step.workspace_id, step.before;
  ELSE
    -- VALUES, not INSERT … SELECT: Citus routes it to the workspace's shard (it would run an
    -- INSERT … SELECT as a COPY, which RLS refuses).
    SELECT format('INSERT INTO %s (%s) VALUES (%s)', r.rel,
                  string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
                  string_agg(format('($1 ->> %L)::%s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                             ORDER BY a.attnum))
      INTO statement
      FROM pg_attribute a
     WHERE a.attrelid = r.rel AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND step.before ? a.attname;
    EXECUTE statement USING step.before;
  END IF;
  SELECT a.id INTO made FROM public.activity a
   WHERE a.workspace_id = step.workspace_id AND a.undo_of = step.id AND NOT a.cascaded
   ORDER BY a.at DESC LIMIT 1;
  RETURN made;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.undo_step(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.undo_step(public.activity) TO api_write;

-- What undo_changes answers for each record it puts back.
CREATE TYPE tally.undone AS (undone uuid, table_name text, record_id text, action text, activity_id uuid);

-- Undoes `targets` in their order (newest first), each record checked when its turn comes, after
-- the undos before it: the newest standing change in its way is named (PT409), and nothing stays.
CREATE FUNCTION tally.undo_all(targets uuid[]) RETURNS SETOF tally.undone
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  target uuid;
  each_step uuid;
  step public.activity;
  blocker public.activity;
BEGIN
  FOREACH target IN ARRAY targets LOOP
    FOREACH each_step IN ARRAY tally.undo_steps(tally.change_of(ws, target)) LOOP
      step := tally.change_of(ws, each_step);
      PERFORM tally.lock_record(step);
      blocker := tally.undo_blocker(step, '{}');
      IF blocker.id IS NOT NULL AND blocker.undo_of = step.id THEN
        -- No advice to follow: undoing that undo would make the change again (a delete, maybe
        -- of a record another client made), which is not what undoing this change asks for.
        RAISE SQLSTATE 'PT409' USING
          MESSAGE = format('Change %s was undone already, by change %s (%s)', step.id, blocker.id, blocker.at),
          HINT = 'Nothing is left to undo of it: its record is as it was before it';
      ELSIF blocker.id IS NOT NULL THEN
        RAISE SQLSTATE 'PT409' USING
          MESSAGE = format('Change %s cannot be undone: %s %s changed again since (change %s, %s at %s)',
                           step.id, step.table_name, step.record_id, blocker.id, blocker.action, blocker.at),
          HINT = format('Undo change %s first, or change the record by hand', blocker.id);
      END IF;
      RETURN NEXT (step.id, step.table_name, step.record_id,
                   CASE step.action WHEN 'insert' THEN 'delete' WHEN 'delete' THEN 'insert' ELSE 'update' END,
                   tally.undo_step(step))::tally.undone;
    END LOOP;
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.undo_all(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.undo_all(uuid[]) TO api_write;

-- Undoes several changes at once, newest first, all or nothing: the changes named by id, or
-- every change of one request, or every change of one token at or after a time (the caller's
-- own token unless another is named). Of a time range, a change already undone, a cascade's
-- (its parent's undo brings it back) and an undo whose change is in the range too (the two
-- cancel out) are left out; an undo of an earlier change is undone too (the earlier change
-- comes back), so the workspace's records are as they were at that time. `dry_run` answers
-- what it would do and changes nothing; it is refused for what the undo itself would be.
-- Answers a row per record put back: the change undone, the record, what the undo does to it
-- (insert: brings it back, update: reverts it, delete: removes it) and the undo's own change.
CREATE FUNCTION public.undo_changes(activity_ids uuid[] DEFAULT NULL, request_id uuid DEFAULT NULL,
                                    since timestamptz DEFAULT NULL, token_id uuid DEFAULT NULL,
                                    dry_run boolean DEFAULT false)
RETURNS TABLE (undone uuid, table_name text, record_id text, action text, activity_id uuid)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  ws uuid := tally.current_workspace_id();
  caller text := tally.jwt_claims() ->> 'sub';
  wanted uuid[] := activity_ids;
  by_request uuid := request_id;
  token uuid;
  targets uuid[];
  preview tally.undone[];
  missing uuid;
BEGIN
  IF ws IS NULL THEN
    RAISE SQLSTATE '42501' USING MESSAGE = 'An undo belongs to a workspace, and this request names none';
  END IF;
  IF (wanted IS NOT NULL)::int + (by_request IS NOT NULL)::int + (since IS NOT NULL)::int <> 1 THEN
    RAISE SQLSTATE 'PT400' USING MESSAGE = 'Name what to undo in one way: activity_ids, request_id, or since',
      HINT = 'activity_ids: the ids of the changes; request_id: every change of one request; since: every change of a token at or after a time';
  END IF;
  IF wanted IS NOT NULL THEN
    IF cardinality(wanted) NOT BETWEEN 1 AND 1000 THEN
      RAISE SQLSTATE 'PT400' USING MESSAGE = 'activity_ids names 1 to 1000 changes';
    END IF;
    targets := ARRAY(SELECT a.id FROM public.activity a WHERE a.workspace_id = ws AND a.id = ANY (wanted)
                      ORDER BY a.at DESC, a.id DESC);
    SELECT w INTO missing FROM unnest(wanted) w WHERE NOT w = ANY (targets) LIMIT 1;
    IF missing IS NOT NULL THEN
      RAISE SQLSTATE 'PT404' USING MESSAGE = format('No change %s in this workspace''s activity', missing),
        HINT = 'List the activity for the id of the change to undo (it may be older than the log keeps)';
    END IF;
  ELSIF by_request IS NOT NULL THEN
    targets := ARRAY(SELECT a.id FROM public.activity a
                      WHERE a.workspace_id = ws AND a.request_id = by_request AND NOT a.cascaded
                      ORDER BY a.at DESC, a.id DESC);
  ELSE
    token := coalesce(token_id, CASE WHEN caller ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$' THEN caller::uuid END);
    IF token IS NULL THEN
      RAISE SQLSTATE 'PT400' USING MESSAGE = 'since undoes the changes of one token: name it with token_id';
    END IF;
    targets := tally.undo_range(ws, token, since);
  END IF;
  IF cardinality(targets) > 1000 THEN
    RAISE SQLSTATE 'PT413' USING MESSAGE = format('%s changes to undo: at most 1000 are undone at once', cardinality(targets)),
      HINT = 'Undo fewer at once: a later since, or the ids of some of them';
  END IF;

  IF NOT dry_run THEN
    RETURN QUERY SELECT * FROM tally.undo_all(targets);
    RETURN;
  END IF;
  -- A preview: the undo made, then rolled back (a subtransaction), what it did answered.
  BEGIN
    SELECT coalesce(array_agg(u), '{}') INTO preview FROM tally.undo_all(targets) u;
    RAISE SQLSTATE 'TL001';
  EXCEPTION WHEN SQLSTATE 'TL001' THEN
    NULL;
  END;
  RETURN QUERY SELECT p.undone, p.table_name, p.record_id, p.action, NULL::uuid FROM unnest(preview) p;
END
$$;
REVOKE EXECUTE ON FUNCTION public.undo_changes(uuid[], uuid, timestamptz, uuid, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.undo_changes(uuid[], uuid, timestamptz, uuid, boolean) TO api_write;

-- The changes of `token` at or after `since` that undoing the range undoes, newest first (see
-- undo_changes): read newest-first, an undo that stands takes its change out of the range (the
-- two cancel out) or, for a change of before the range, is itself undone.
CREATE FUNCTION tally.undo_range(ws uuid, token uuid, since timestamptz) RETURNS uuid[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  x public.activity;
  gone uuid[] := '{}';
  picked uuid[] := '{}';
BEGIN
  FOR x IN
    SELECT * FROM public.activity a
     WHERE a.workspace_id = ws AND a.at >= since AND a.token_id = token AND NOT a.cascaded
     ORDER BY a.at DESC, a.id DESC
  LOOP
    CONTINUE WHEN x.id = ANY (gone);
    IF x.undo_of IS NOT NULL THEN
      gone := gone || x.undo_of;
      -- An undo of a change in the range cancels out with it; of an earlier one, it is undone.
      CONTINUE WHEN EXISTS (SELECT 1 FROM public.activity c
                             WHERE c.workspace_id = ws AND c.id = x.undo_of AND c.at >= since AND c.token_id = token);
    END IF;
    picked := picked || x.id;
  END LOOP;
  RETURN picked;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.undo_range(uuid, uuid, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.undo_range(uuid, uuid, timestamptz) TO api_write;

-- One change: undo_changes with its id, answering the activity the undo made, as before.
CREATE OR REPLACE FUNCTION public.undo_change(activity_id uuid) RETURNS SETOF public.activity
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  made uuid[];
BEGIN
  SELECT coalesce(array_agg(u.activity_id), '{}') INTO made FROM public.undo_changes(ARRAY[activity_id]) u;
  RETURN QUERY SELECT * FROM public.activity a WHERE a.workspace_id = ws AND a.id = ANY (made) ORDER BY a.at, a.id;
END
$$;

-- Down Migration
DROP FUNCTION IF EXISTS public.undo_changes(uuid[], uuid, timestamptz, uuid, boolean);
DROP FUNCTION IF EXISTS tally.undo_range(uuid, uuid, timestamptz);
DROP FUNCTION IF EXISTS tally.undo_all(uuid[]);
DROP TYPE IF EXISTS tally.undone;
DROP FUNCTION IF EXISTS tally.undo_step(public.activity);
DROP FUNCTION IF EXISTS tally.lock_record(public.activity);
DROP FUNCTION IF EXISTS tally.record_of(public.activity);
DROP FUNCTION IF EXISTS tally.refuse_cascade(public.activity);
DROP FUNCTION IF EXISTS tally.undo_steps(public.activity);
DROP FUNCTION IF EXISTS tally.change_of(uuid, uuid);
DROP FUNCTION IF EXISTS tally.undo_blocker(public.activity, uuid[]);
DROP FUNCTION IF EXISTS tally.report_changes();
-- The trigger and undo_change of before (166, 161).
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
DROP FUNCTION IF EXISTS tally.cascaded_delete(uuid, uuid, text, jsonb, text);
DROP FUNCTION IF EXISTS tally.request_id(jsonb);
DROP FUNCTION IF EXISTS tally.changed_fields(jsonb, jsonb, text);
ALTER TABLE public.activity ADD COLUMN transaction_id bigint NOT NULL DEFAULT txid_current();
DROP INDEX IF EXISTS public.activity_request_idx;
ALTER TABLE public.activity DROP COLUMN IF EXISTS request_id;
ALTER TABLE public.activity DROP COLUMN IF EXISTS cascaded;
ALTER TABLE public.activity DROP COLUMN IF EXISTS bytes;
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
