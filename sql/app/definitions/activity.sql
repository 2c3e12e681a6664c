-- The activity log (public.activity, of the baseline migration): every insert, update and delete
-- of a workspace's records, written by a trigger in the transaction of the change, whatever made
-- it (/rest/v1, /api/v1, MCP, or SQL run in the database), with the record before and after and
-- who made it. Undo is in undo.sql.

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

-- A jsonb object of the fields whose values differ between two rows: `side` 'before' gives the
-- old values, 'after' the new ones; NULL when nothing differs.
CREATE OR REPLACE FUNCTION tally.changed_fields(old_row jsonb, new_row jsonb, side text) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT jsonb_object_agg(n.key, CASE WHEN side = 'before' THEN o.value ELSE n.value END)
    FROM jsonb_each(new_row) n LEFT JOIN jsonb_each(old_row) o ON o.key = n.key
   WHERE o.value IS DISTINCT FROM n.value
$$;
GRANT EXECUTE ON FUNCTION tally.changed_fields(jsonb, jsonb, text) TO PUBLIC;

-- The request a change belongs to: the claim the server sets, else one made for this
-- transaction (SQL run in the database), kept in a transaction-local setting.
CREATE OR REPLACE FUNCTION tally.request_id(claims jsonb) RETURNS uuid
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
CREATE OR REPLACE FUNCTION tally.cascaded_delete(ws uuid, request uuid, tbl text, old_row jsonb, log text) RETURNS boolean
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

-- The row trigger of a tracked table. Its arguments: the table's name (a shard on Citus has a
-- name of its own) and the key columns. The actor comes from the request's JWT claims, which
-- only the server sets (a token's id as `sub`, its `scope`, its label as `token_name`, the
-- `surface`, the `request_id`); none: SQL run in the database. An update that changes nothing is
-- not a change. Its row goes into the local shard of activity that holds the workspace when this
-- node has it (on Citus, the worker where the changed row's shard is: the two are colocated).
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
  col text;
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
  -- The key's values joined by '/', in assignments, not a statement: every change runs this.
  FOREACH col IN ARRAY TG_ARGV[1:] LOOP
    key := concat_ws('/', key, rec ->> col);
  END LOOP;
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
REVOKE EXECUTE ON FUNCTION tally.record_activity() FROM PUBLIC;

-- Names the changes of this request in its response headers: Tally-Changes (how many records
-- it changed, a cascade's rows not counted: 0 when it changed nothing), Tally-Activity-Id (their
-- ids, oldest first, up to 100) and Tally-Request-Id (what they share). Run as the caller, in
-- the request's transaction (on Citus a router read of the workspace's shard, on the
-- connection that wrote it); it appends to the headers the request's SQL may have set. It also
-- counts what the request's entries take against the workspace's budget (tally.count_activity).
CREATE OR REPLACE FUNCTION tally.report_changes() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  ws uuid := tally.current_workspace_id();
  request uuid;
  made integer;
  ids text;
  taken bigint;
  undoing boolean;
  headers text := coalesce(current_setting('response.headers', true), '');
BEGIN
  IF ws IS NULL OR NOT coalesce(claims ->> 'request_id' ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$', false) THEN
    RETURN;
  END IF;
  request := (claims ->> 'request_id')::uuid;
  SELECT count(*) FILTER (WHERE NOT a.cascaded),
         string_agg(a.id::text, ', ' ORDER BY a.at, a.id) FILTER (WHERE NOT a.cascaded AND a.n <= 100),
         coalesce(sum(a.bytes), 0), coalesce(bool_and(a.undo_of IS NOT NULL), false)
    INTO made, ids, taken, undoing
    FROM (SELECT x.id, x.at, x.cascaded, x.bytes, x.undo_of,
                 row_number() OVER (PARTITION BY x.cascaded ORDER BY x.at, x.id) AS n
            FROM public.activity x
           WHERE x.workspace_id = ws AND x.request_id = request) a;
  IF taken > 0 THEN
    PERFORM tally.count_activity(ws, request, taken, undoing,
                                 CASE WHEN claims ->> 'activity_budget' ~ '^[0-9]{1,18}$'
                                      THEN (claims ->> 'activity_budget')::bigint END);
  END IF;
  IF trim(headers) = '' THEN
    headers := '[]';
  END IF;
  -- An assignment, not PERFORM: PL/pgSQL evaluates it without a statement of its own.
  headers := set_config('response.headers',
    (headers::jsonb || jsonb_build_array(jsonb_build_object('Tally-Changes', made::text))
       || CASE WHEN made > 0 THEN jsonb_build_array(jsonb_build_object('Tally-Request-Id', request::text)) ELSE '[]' END
       || CASE WHEN ids IS NOT NULL THEN jsonb_build_array(jsonb_build_object('Tally-Activity-Id', ids)) ELSE '[]' END)::text,
    true);
END
$$;
REVOKE EXECUTE ON FUNCTION tally.report_changes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.report_changes() TO anon, api_read, api_write;

-- A refusal as the gateway answers it (RAISE SQLSTATE 'PGRST'): code, status, sentences, headers.
CREATE OR REPLACE FUNCTION tally.refuse(code text, status integer, message text, details text, hint text,
                                        headers jsonb DEFAULT '{}') RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RAISE SQLSTATE 'PGRST' USING
    MESSAGE = jsonb_build_object('code', code, 'message', message, 'details', details, 'hint', hint)::text,
    DETAIL = jsonb_build_object('status', status, 'headers', headers)::text;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.refuse(text, integer, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.refuse(text, integer, text, text, text, jsonb) TO api_write;

-- Adds `activity` and `keys` bytes to the counts of workspace `ws` (tally.workspace_usage), in
-- the caller's transaction, and answers the workspace's totals with them. A workspace's count is
-- spread over slots: a write takes the first slot no open transaction holds, or a new one when
-- every slot is held, so that the writes of one workspace never wait for each other's commits
-- (one row per workspace, held from a write's count to its commit, put them in a line). A
-- workspace has as many slots as it ever had writes counting at once, which its share of the
-- pool bounds. The totals are the slots as committed, with this write's own.
CREATE OR REPLACE FUNCTION tally.add_usage(ws uuid, activity bigint, keys bigint,
                                           OUT activity_total bigint, OUT key_total bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  free integer;
BEGIN
  SELECT u.slot INTO free FROM tally.workspace_usage u WHERE u.workspace_id = ws
   ORDER BY u.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF free IS NULL THEN
    SELECT coalesce(max(u.slot) + 1, 0) INTO free FROM tally.workspace_usage u WHERE u.workspace_id = ws;
  END IF;
  INSERT INTO tally.workspace_usage AS u (workspace_id, slot, activity_bytes, key_bytes)
  VALUES (ws, free, activity, keys)
  ON CONFLICT (workspace_id, slot) DO UPDATE
    SET activity_bytes = u.activity_bytes + excluded.activity_bytes, key_bytes = u.key_bytes + excluded.key_bytes;
  SELECT sum(u.activity_bytes), sum(u.key_bytes) INTO activity_total, key_total
    FROM tally.workspace_usage u WHERE u.workspace_id = ws;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.add_usage(uuid, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.add_usage(uuid, bigint, bigint) TO api_write;

-- Counts `taken` bytes of entries of `request` against the activity log's budget of workspace
-- `ws` (the claim `activity_budget` the server sets; none: counted, never refused). The log holds
-- at most its budget: a request that would take it past is refused, nothing of it written, with
-- a Retry-After of when the sweep (tally.prune_activity_budget, every minute) can make room, and
-- one whose changes alone take more than a quarter of the budget is refused for good. An undo
-- (every entry of the request undoes one) may take the log up to twice its budget: what the log
-- holds can always be undone.
CREATE OR REPLACE FUNCTION tally.count_activity(ws uuid, request uuid, taken bigint, undoing boolean, budget bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  total bigint;
  cap bigint := budget * CASE WHEN undoing THEN 2 ELSE 1 END;
  frees timestamptz;
  retry bigint := 60;
BEGIN
  total := (tally.add_usage(ws, taken, 0)).activity_total;
  IF budget IS NULL OR (total <= cap AND taken <= budget / 4) THEN
    RETURN;
  END IF;
  IF taken > budget / 4 THEN
    PERFORM tally.refuse('PT413', 413,
      format('This request''s changes take %s bytes of the activity log, more than a quarter of the workspace''s budget (%s bytes)',
             taken, budget),
      'Nothing was written', 'Change fewer records at once');
  END IF;
  -- The sweep prunes the oldest changes first, never one of the last 24 hours: room comes at its
  -- next run once the oldest `total - cap` bytes of the log may go, the newest of them 24 hours
  -- after it was made. The log is read from its oldest entry only as far as those bytes, in the
  -- order of its index on (workspace_id, at) (entries of one time are one request's: any order
  -- of them gives the same answer): a few entries for a small write. Summing the whole day's log
  -- cost 130-160 ms of Postgres at each refusal: a token could keep a core busy with writes it
  -- knew would be refused.
  -- At most 1,000 entries: past them (a log an undo took to twice its budget), the answer is the
  -- longest wait, a day and a minute.
  SELECT x.at INTO frees
    FROM (SELECT o.at, sum(o.bytes) OVER (ORDER BY o.at ROWS UNBOUNDED PRECEDING) AS freed
            FROM (SELECT a.at, a.bytes FROM public.activity a
                   WHERE a.workspace_id = ws AND a.request_id IS DISTINCT FROM request
                   ORDER BY a.at LIMIT 1000) o) x
   WHERE x.freed >= total - cap ORDER BY x.at LIMIT 1;
  retry := retry + greatest(ceil(extract(epoch FROM coalesce(frees, now()) + interval '24 hours' - now())), 0)::bigint;
  PERFORM tally.refuse('PT429', 429,
    format('The activity log of this workspace is full: with this request''s changes it would hold %s bytes, its budget is %s%s',
           total, budget, CASE WHEN undoing THEN ' (twice that for an undo)' ELSE '' END),
    'Nothing was written. Changes of the last 24 hours are kept for undo; older ones are pruned to make room every minute',
    'Retry after the seconds of Retry-After, or ask the operator for a larger budget (TALLY_ACTIVITY_BUDGET_BYTES)',
    jsonb_build_object('Retry-After', retry::text));
END
$$;
REVOKE EXECUTE ON FUNCTION tally.count_activity(uuid, uuid, bigint, boolean, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.count_activity(uuid, uuid, bigint, boolean, bigint) TO api_write;

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

-- Keeps `days` of activity (the server runs it every hour: TALLY_ACTIVITY_RETENTION_DAYS), and
-- subtracts what went from each workspace's count. A DELETE per workspace, not a data-modifying
-- WITH, which has no distributed plan on Citus; each is routed to the workspace's shard there.
CREATE OR REPLACE FUNCTION tally.prune_activity(days integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cutoff timestamptz := now() - make_interval(days => greatest(days, 1));
  ws uuid;
  size integer;
  freed bigint;
  gone bigint := 0;
BEGIN
  FOR ws IN SELECT DISTINCT a.workspace_id FROM public.activity a WHERE a.at < cutoff LOOP
    freed := 0;
    FOR size IN DELETE FROM public.activity a WHERE a.workspace_id = ws AND a.at < cutoff RETURNING a.bytes LOOP
      freed := freed + size;
      gone := gone + 1;
    END LOOP;
    -- From the workspace's first slot: its sum is what counts.
    UPDATE tally.workspace_usage u SET activity_bytes = u.activity_bytes - freed WHERE u.workspace_id = ws AND u.slot = 0;
  END LOOP;
  RETURN gone;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.prune_activity(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.prune_activity(integer) TO authenticator;

-- The workspaces whose log holds more than half its budget (the server prunes each, every
-- minute, with tally.prune_activity_budget: TALLY_ACTIVITY_BUDGET_BYTES).
-- PL/pgSQL: a SQL function would be inlined into the caller's statement, which Citus cannot
-- plan around a distributed table.
CREATE OR REPLACE FUNCTION tally.activity_over_budget(budget bigint) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY SELECT u.workspace_id FROM tally.workspace_usage u
                GROUP BY u.workspace_id HAVING sum(u.activity_bytes) > budget / 2;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.activity_over_budget(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.activity_over_budget(bigint) TO authenticator;

-- Keeps the log of workspace `ws` within its budget: past half of it, it loses its oldest
-- changes, whole requests at a time (a fund's delete with the transactions it took), back to
-- half, which leaves room for the next writes. A change of the last 24 hours is never pruned,
-- so an undo a write offered works for at least a day; the workspace's row notes the newest
-- change pruned, which an undo of an older one names. The workspace's slots are locked first
-- and its count made anew from the log (the changes SQL in the database made are counted then
-- too), into its first slot. A request that counts its changes meanwhile does so in a slot of
-- its own, which is left as it is: if it committed before the log was added up, its changes
-- count twice until the next sweep, never less than they take. Answers how many changes went.
CREATE OR REPLACE FUNCTION tally.prune_activity_budget(ws uuid, budget bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  kept_after timestamptz := now() - interval '24 hours';
  total bigint;
  boundary timestamptz;
  requests uuid[];
  size integer;
  stamp timestamptz;
  freed bigint := 0;
  newest timestamptz;
  gone bigint := 0;
  locked integer[];
BEGIN
  locked := ARRAY(SELECT u.slot FROM tally.workspace_usage u WHERE u.workspace_id = ws ORDER BY u.slot FOR UPDATE);
  SELECT coalesce(sum(a.bytes), 0) INTO total FROM public.activity a WHERE a.workspace_id = ws;
  IF total > budget / 2 THEN
    -- The oldest changes, up to the one that frees enough (all of those older than a day if none does).
    SELECT x.at INTO boundary
      FROM (SELECT a.at, sum(a.bytes) OVER (ORDER BY a.at, a.id) AS freed FROM public.activity a
             WHERE a.workspace_id = ws AND a.at < kept_after) x
     WHERE x.freed >= total - budget / 2 ORDER BY x.at LIMIT 1;
    -- Their requests, whole, but none with a change of the last day.
    requests := ARRAY(SELECT a.request_id FROM public.activity a
                       WHERE a.workspace_id = ws
                         AND a.request_id IN (SELECT o.request_id FROM public.activity o
                                               WHERE o.workspace_id = ws AND o.at < kept_after
                                                 AND o.at <= coalesce(boundary, kept_after))
                       GROUP BY a.request_id HAVING max(a.at) < kept_after);
    FOR size, stamp IN DELETE FROM public.activity a WHERE a.workspace_id = ws AND a.request_id = ANY (requests)
                       RETURNING a.bytes, a.at LOOP
      freed := freed + size;
      newest := greatest(newest, stamp);
      gone := gone + 1;
    END LOOP;
  END IF;
  UPDATE tally.workspace_usage u
     SET activity_bytes = CASE WHEN u.slot = 0 THEN total - freed ELSE 0 END,
         activity_pruned_until = CASE WHEN u.slot = 0 THEN greatest(u.activity_pruned_until, newest) END
   WHERE u.workspace_id = ws AND u.slot = ANY (locked);
  RETURN gone;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.prune_activity_budget(uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.prune_activity_budget(uuid, bigint) TO authenticator;
