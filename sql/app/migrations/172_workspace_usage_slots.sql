-- Up Migration
-- A workspace's counts of tally.workspace_usage spread over slots, rows of their own
-- (tally.add_usage, activity.sql). With one row per workspace, every write of a workspace updated
-- that row at its end and held it until its commit, so the workspace's writes waited for each
-- other's commits one by one (5.6 ms of an insert's 6.5 at 8 connections, its throughput halved).
-- A write now takes a slot no open transaction holds, or a new one. What a workspace counts is
-- the sum of its slots; the row of slot 0, its first, keeps where the budget's sweep pruned to.
ALTER TABLE tally.workspace_usage ADD COLUMN slot integer NOT NULL DEFAULT 0;
ALTER TABLE tally.workspace_usage DROP CONSTRAINT workspace_usage_pkey;
ALTER TABLE tally.workspace_usage ADD PRIMARY KEY (workspace_id, slot);

-- Down Migration
-- Each workspace's slots summed into its slot 0, then one row per workspace again.
UPDATE tally.workspace_usage u
   SET activity_bytes = s.activity_bytes, key_bytes = s.key_bytes
  FROM (SELECT workspace_id, sum(activity_bytes) AS activity_bytes, sum(key_bytes) AS key_bytes
          FROM tally.workspace_usage GROUP BY workspace_id) s
 WHERE u.workspace_id = s.workspace_id AND u.slot = 0;
DELETE FROM tally.workspace_usage WHERE slot <> 0;
ALTER TABLE tally.workspace_usage DROP CONSTRAINT workspace_usage_pkey;
ALTER TABLE tally.workspace_usage ADD PRIMARY KEY (workspace_id);
ALTER TABLE tally.workspace_usage DROP COLUMN slot;
