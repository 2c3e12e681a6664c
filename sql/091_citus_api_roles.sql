-- Up Migration
-- On a Citus coordinator, what a request needs so that its statements run on the workers; on
-- plain Postgres nothing (the function returns at once). Idempotent: run again, it changes
-- nothing (a role that has its secret keeps it).
--
-- Citus runs a request's statements on the workers over connections of its own, logged in as
-- the role the request runs as (api_read, api_write, anon: the roles authenticator may become).
-- So those roles log in there, with a password nobody types or sees: 256 random bits made here,
-- kept only in pg_dist_authinfo (readable by superusers alone), from which the coordinator takes
-- it for its connections. On a worker such a role has the grants and the forced RLS it has on the
-- coordinator, nothing more.
--
-- The claims reach the workers with the transaction: the engine sets them with SET LOCAL, which
-- Citus copies to every worker the transaction reaches when citus.propagate_set_commands is
-- 'local' (set here for the server's login). A computed field (summary(funds)) is called on the
-- worker, inside the query on the shard, and reads the workspace's other tables there: rows of
-- the same workspace, so of the shards beside it on that very worker (colocated), read in the
-- same transaction. Citus refuses any query from inside a query on a shard unless
-- citus.allow_nested_distributed_execution is on; it is, for the API roles' sessions on the
-- workers only (a role's settings apply where it logs in; the coordinator's sessions log in as
-- authenticator).
CREATE OR REPLACE FUNCTION tally.citus_api_roles() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog
AS $$
DECLARE
  api_role text;
  secret text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    RETURN;
  END IF;
  ALTER ROLE authenticator SET citus.propagate_set_commands = 'local';
  FOR api_role IN
    SELECT m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = 'authenticator'::regrole ORDER BY 1
  LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_dist_authinfo a WHERE a.nodeid = 0 AND a.rolename = api_role) THEN
      secret := encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex');
      EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', api_role, secret);
      INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, api_role, 'password=' || secret);
    END IF;
    EXECUTE format('ALTER ROLE %I SET citus.allow_nested_distributed_execution = on', api_role);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.citus_api_roles() FROM PUBLIC;

SELECT tally.citus_api_roles();

-- Down Migration
DO $$
DECLARE
  api_role text;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    ALTER ROLE authenticator RESET citus.propagate_set_commands;
    FOR api_role IN
      SELECT m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = 'authenticator'::regrole
    LOOP
      EXECUTE format('ALTER ROLE %I WITH NOLOGIN PASSWORD NULL', api_role);
      EXECUTE format('ALTER ROLE %I RESET citus.allow_nested_distributed_execution', api_role);
      EXECUTE format('DELETE FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = %L', api_role);
    END LOOP;
  END IF;
END
$$;
DROP FUNCTION IF EXISTS tally.citus_api_roles();
