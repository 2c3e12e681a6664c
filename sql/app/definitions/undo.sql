-- Undo (public.undo_changes, and public.undo_change for one change) treats the activity log as a
-- stack: a change and its undo cancel out when deciding whether a record changed since, so
-- undoing a record's changes newest-first always works, and a refusal names the newest change
-- that is in the way and not undone, so following its advice converges. The type tally.undone is
-- the migration 169_undo_stack's.

-- The newest change of a record after `change` that still stands in the way of undoing it, or
-- NULL: the record's later changes are read newest-first; one that a later standing undo undid
-- does not stand, and an undo that stands cancels out with the change it undid when that change
-- is later than `change` too. Any other standing later change is in the way. `undone` names
-- changes to take as undone already (a preview's earlier steps). When `change` itself was
-- undone by a standing undo, that undo is answered.
CREATE OR REPLACE FUNCTION tally.undo_blocker(change public.activity, undone uuid[]) RETURNS public.activity
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
CREATE OR REPLACE FUNCTION tally.change_of(ws uuid, change uuid) RETURNS public.activity
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
CREATE OR REPLACE FUNCTION tally.undo_steps(target public.activity) RETURNS uuid[]
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
CREATE OR REPLACE FUNCTION tally.refuse_cascade(step public.activity) RETURNS void
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
CREATE OR REPLACE FUNCTION tally.record_of(step public.activity, OUT rel regclass, OUT match text, OUT probe jsonb)
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
-- and the undo's own write would be overwritten and never seen. A transaction lock on the
-- record's name comes first, so two undos of one record at the same moment are one after the
-- other also when the record is not there to lock (two undos of its delete: the second is
-- refused as undone already, 409 PT409, where its insert failed on the key, 23505). Advisory
-- locks are the node's: on Citus every undo runs on the coordinator.
CREATE OR REPLACE FUNCTION tally.lock_record(step public.activity) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record := tally.record_of(step);
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(format('tally.undo %s %s %s', step.workspace_id, step.table_name,
                                                        step.record_id), 0));
  EXECUTE format('SELECT 1 FROM %s AS t, jsonb_populate_record(NULL::%s, $1) AS p WHERE %s FOR UPDATE OF t',
                 r.rel, r.rel, r.match)
    USING r.probe, step.workspace_id;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.lock_record(public.activity) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.lock_record(public.activity) TO api_write;

-- Puts one record back as it was before `step`, as the caller (RLS decides what it may touch),
-- the undo logged with undo_of = the step. Answers the undo's own change.
CREATE OR REPLACE FUNCTION tally.undo_step(step public.activity) RETURNS uuid
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

-- Undoes `targets` in their order (newest first), each record checked when its turn comes, after
-- the undos before it: the newest standing change in its way is named (PT409), and nothing stays.
CREATE OR REPLACE FUNCTION tally.undo_all(targets uuid[]) RETURNS SETOF tally.undone
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
CREATE OR REPLACE FUNCTION public.undo_changes(activity_ids uuid[] DEFAULT NULL, request_id uuid DEFAULT NULL,
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
  pruned timestamptz;
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
      -- Where the log starts, when its budget pruned it (the retention's days are the server's).
      SELECT u.activity_pruned_until INTO pruned FROM tally.workspace_usage u WHERE u.workspace_id = ws AND u.slot = 0;
      IF pruned IS NOT NULL THEN
        RAISE SQLSTATE 'PT404' USING MESSAGE = format('No change %s in this workspace''s activity', missing),
          DETAIL = format('The log keeps the changes after %s: older ones were pruned to keep it within its budget', pruned),
          HINT = 'List the activity for the id of the change to undo';
      END IF;
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
CREATE OR REPLACE FUNCTION tally.undo_range(ws uuid, token uuid, since timestamptz) RETURNS uuid[]
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
REVOKE EXECUTE ON FUNCTION public.undo_change(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.undo_change(uuid) TO api_write;
