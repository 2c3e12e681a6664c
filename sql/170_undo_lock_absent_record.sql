-- Up Migration
-- Two undos of one record at the same moment are one after the other, also when the record is
-- not there to lock (two undos of its delete): each takes a transaction lock on the record's name
-- before it reads the log, so the second sees the first's undo and is refused as undone already
-- (409 PT409), where both found nothing in the way and the second's insert failed on the key
-- (23505). Advisory locks are the node's: on Citus every undo runs on the coordinator.
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

-- Down Migration
CREATE OR REPLACE FUNCTION tally.lock_record(step public.activity) RETURNS void
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
