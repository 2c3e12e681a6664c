-- Up Migration
-- An actor keeps its 1,000 newest audit entries of no workspace (tally.audit,
-- sql/app/definitions/admin.sql): each entry past them deletes the oldest. This index lets that
-- delete read an actor's newest such entries by id, never the whole log; the actors with more
-- than that already are cut to it once here.
CREATE INDEX audit_log_actor_id_idx ON tally.audit_log (actor, id) WHERE workspace_id IS NULL;
DELETE FROM tally.audit_log
 WHERE id IN (SELECT n.id
                FROM (SELECT a.id, row_number() OVER (PARTITION BY a.actor ORDER BY a.id DESC) AS newest
                        FROM tally.audit_log a WHERE a.workspace_id IS NULL) n
               WHERE n.newest > 1000);

-- Down Migration
DROP INDEX tally.audit_log_actor_id_idx;
