-- Up Migration
-- A workspace keeps its 1,000 newest audit entries (tally.audit, sql/app/definitions/admin.sql):
-- each entry past them deletes the oldest. This index lets that delete read a workspace's newest
-- entries by id, never the whole log; the logs longer than that already are cut to it once here.
CREATE INDEX audit_log_workspace_id_idx ON tally.audit_log (workspace_id, id);
DELETE FROM tally.audit_log
 WHERE id IN (SELECT n.id
                FROM (SELECT a.id, row_number() OVER (PARTITION BY a.workspace_id ORDER BY a.id DESC) AS newest
                        FROM tally.audit_log a WHERE a.workspace_id IS NOT NULL) n
               WHERE n.newest > 1000);

-- Down Migration
DROP INDEX tally.audit_log_workspace_id_idx;
