-- Up Migration
-- A budget per workspace for the activity log and for the idempotency keys: what each
-- workspace's entries and stored answers take, in bytes, counted as they are written, so that a
-- write past its workspace's budget is refused in its own transaction (activity.sql:
-- tally.count_activity, run by tally.report_changes; idempotency.sql: tally.count_keys, run by
-- tally.idempotency_save) and the sweeps know whom to prune without adding up the log.
--
-- One row per workspace, written in the transactions of its requests as the caller: on Citus it
-- lives on the workspace's shard with its records (tally.tenant_tables names it), and a write
-- and its count stay on one worker. The sweeps, run as the owner, subtract what they delete.
-- (Numbered 171: 170 was the name of a migration folded into the definitions.)
CREATE TABLE tally.workspace_usage (
  workspace_id          uuid NOT NULL PRIMARY KEY,
  -- The activity log's entries (their `bytes`), and the idempotency keys' stored answers (theirs).
  activity_bytes        bigint NOT NULL DEFAULT 0,
  key_bytes             bigint NOT NULL DEFAULT 0,
  -- The newest change the budget's sweep pruned: the log keeps what came after it (NULL: none).
  activity_pruned_until timestamptz
);
COMMENT ON TABLE tally.workspace_usage IS 'Bytes each workspace''s activity log and idempotency keys take, against their budgets';

-- What a key's record takes: its stored answer (headers and body), its key, and 150 for the
-- row's other columns (its 43-character fingerprint among them).
ALTER TABLE tally.idempotency_keys ADD COLUMN bytes integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN tally.idempotency_keys.bytes IS 'What the record takes, counted against the workspace''s budget';
UPDATE tally.idempotency_keys
   SET bytes = octet_length(key) + octet_length(coalesce(headers::text, '')) + octet_length(coalesce(body, '')) + 150;

-- What the workspaces hold already.
INSERT INTO tally.workspace_usage (workspace_id, activity_bytes)
  SELECT workspace_id, sum(bytes) FROM public.activity GROUP BY workspace_id;
INSERT INTO tally.workspace_usage AS u (workspace_id, key_bytes)
  SELECT workspace_id, sum(bytes) FROM tally.idempotency_keys GROUP BY workspace_id
  ON CONFLICT (workspace_id) DO UPDATE SET key_bytes = excluded.key_bytes;

-- Closed until policies/workspace_usage.sql opens a workspace's own row to the write role.
ALTER TABLE tally.workspace_usage ENABLE ROW LEVEL SECURITY;
ALTER TABLE tally.workspace_usage FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE ON tally.workspace_usage TO api_write;

-- Down Migration
DROP TABLE IF EXISTS tally.workspace_usage;
ALTER TABLE tally.idempotency_keys DROP COLUMN IF EXISTS bytes;
