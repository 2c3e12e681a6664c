-- Row-level security for tally.idempotency_keys (sql/163_idempotency_keys.sql): the write role
-- reads, claims and completes the keys of the workspace named by its JWT claim, and no other;
-- it cannot delete one. Schema tally is exposed by no surface: requests reach the table only
-- through the gateway's claim and save of a keyed create. The owner keeps every row, for the
-- 24-hour sweep (tally.prune_idempotency_keys runs as the owner, which forced RLS holds to its
-- own policy). The policies have no subquery: Citus accepts them on a distributed table as they are.
-- Idempotent: `tally policies apply` re-runs it.
ALTER TABLE tally.idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE tally.idempotency_keys FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS idempotency_keys_of_the_workspace ON tally.idempotency_keys;
CREATE POLICY idempotency_keys_of_the_workspace ON tally.idempotency_keys FOR ALL TO api_write
  USING (workspace_id = tally.current_workspace_id()) WITH CHECK (workspace_id = tally.current_workspace_id());
DROP POLICY IF EXISTS idempotency_keys_kept_by_owner ON tally.idempotency_keys;
CREATE POLICY idempotency_keys_kept_by_owner ON tally.idempotency_keys FOR ALL TO CURRENT_USER
  USING (true) WITH CHECK (true);
