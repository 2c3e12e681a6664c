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
-- Its functions are in sql/app/definitions/activity.sql (the trigger, tally.report_changes) and
-- undo.sql (undo as a stack); this migration holds the table's changes and its rows'.
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

-- The entries of before: their transaction_id becomes a request id that tells nothing of the
-- counter (a digest of it with a salt made here and kept nowhere), and an update keeps what it changed.
DO $$
BEGIN
  EXECUTE format('UPDATE public.activity SET request_id = md5(%L || transaction_id::text)::uuid', gen_random_uuid());
END
$$;
-- (What tally.changed_fields computes, written out: a migration runs before the definitions.)
UPDATE public.activity
   SET before = (SELECT jsonb_object_agg(n.key, o.value) FROM jsonb_each(after) n
                   LEFT JOIN jsonb_each(before) o ON o.key = n.key WHERE o.value IS DISTINCT FROM n.value),
       after = (SELECT jsonb_object_agg(n.key, n.value) FROM jsonb_each(after) n
                  LEFT JOIN jsonb_each(before) o ON o.key = n.key WHERE o.value IS DISTINCT FROM n.value)
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

-- What undo_changes answers for each record it puts back.
CREATE TYPE tally.undone AS (undone uuid, table_name text, record_id text, action text, activity_id uuid);

-- Down Migration
-- The functions that read the new columns are applied again, as they were, by the next up.
DROP TYPE IF EXISTS tally.undone CASCADE;
ALTER TABLE public.activity ADD COLUMN transaction_id bigint NOT NULL DEFAULT txid_current();
DROP INDEX IF EXISTS public.activity_request_idx;
ALTER TABLE public.activity DROP COLUMN IF EXISTS request_id;
ALTER TABLE public.activity DROP COLUMN IF EXISTS cascaded;
ALTER TABLE public.activity DROP COLUMN IF EXISTS bytes;
