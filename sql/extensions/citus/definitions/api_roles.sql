-- On a Citus coordinator, what a request needs so that its statements run on the workers.
-- Idempotent: run again, it changes nothing.
--
-- Citus runs a request's statements on the workers over connections of its own, logged in as
-- the role the request runs as (api_read, api_write, anon: the roles authenticator may become).
-- So those roles log in there, with a password nobody types or sees, kept only in
-- pg_dist_authinfo (readable by superusers alone), from which the coordinator takes it for its
-- connections. On a worker such a role has the grants and the forced RLS it has on the
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

-- The secret `api_role` logs in to the workers with: the same in every database of the cluster.
-- Roles are cluster-wide and pg_dist_authinfo is per database: a secret made per database would
-- lock the other databases of the cluster out of their workers. It is derived from one random
-- seed of the cluster: the password verifier of the role tally_citus_seed (NOLOGIN, so it opens
-- nothing), in pg_authid, which every database of the cluster shares and only superusers read.
CREATE OR REPLACE FUNCTION tally.citus_role_secret(api_role text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  seed text;
BEGIN
  SELECT a.rolpassword INTO seed FROM pg_authid a WHERE a.rolname = 'tally_citus_seed';
  IF seed IS NULL THEN
    EXECUTE format(
      'CREATE ROLE tally_citus_seed NOLOGIN PASSWORD %L',
      encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex')
    );
    SELECT a.rolpassword INTO STRICT seed FROM pg_authid a WHERE a.rolname = 'tally_citus_seed';
  END IF;
  RETURN encode(sha256(convert_to(seed || ':' || api_role, 'UTF8')), 'hex');
END
$$;

-- Also: every computed field becomes a distributed object. A function of a distributed table's
-- row (summary(funds), balance(funds)) is called on the workers, inside the query on the shard,
-- so it must exist there; Citus copies a function to every node once it is one. Citus refuses to
-- distribute a function in the transaction that distributed the table of its argument, so this
-- runs after the placement has committed (after-migrate.sql).
--
-- And every such function in a procedural language (PL/pgSQL) plans its statements anew at each
-- call (plan_cache_mode = force_custom_plan). Its statements read tables Citus manages, from
-- inside the query on the shard, where that shard is local. Citus 13.2 runs such a statement
-- through its local plan cache, which misses every time for a plan PL/pgSQL keeps (its check
-- reads the task list, empty in a kept plan), and adds one more plan to the kept plan at every
-- call. The worker's session grew 60 KB per call, 240 MB per read of 2,000 funds with their
-- summary, for as long as the coordinator keeps its connection. A plan made for one call is
-- freed with it, and it costs less (470 against 520 ms for 2,000 calls measured on a worker).
-- Set on every run: a definition applied again comes without it. A SQL function is left alone:
-- a SET clause would stop Postgres inlining it (balance(funds) is summary's field).
CREATE OR REPLACE FUNCTION tally.citus_api_roles() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  api_role text;
  secret text;
  fn record;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    RETURN;
  END IF;
  ALTER ROLE authenticator SET citus.propagate_set_commands = 'local';
  FOR api_role IN
    SELECT m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = 'authenticator'::regrole ORDER BY 1
  LOOP
    secret := tally.citus_role_secret(api_role);
    IF NOT EXISTS (
      SELECT 1 FROM pg_dist_authinfo a WHERE a.nodeid = 0 AND a.rolename = api_role AND a.authinfo = 'password=' || secret
    ) THEN
      EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', api_role, secret);
      DELETE FROM pg_dist_authinfo a WHERE a.nodeid = 0 AND a.rolename = api_role;
      INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, api_role, 'password=' || secret);
    END IF;
    EXECUTE format('ALTER ROLE %I SET citus.allow_nested_distributed_execution = on', api_role);
  END LOOP;
  -- A computed field (a function of a distributed table's row) is called on the workers: it
  -- must exist there. Citus copies a function to every node once it is a distributed object.
  -- Citus's extension puts views of the cluster (citus_tables, citus_schemas) in schema public,
  -- readable by everyone: /rest/v1 would publish them, to anon too. The API roles get none.
  FOR fn IN
    SELECT d.objid::regclass AS rel
      FROM pg_depend d
      JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'citus'
      JOIN pg_class c ON c.oid = d.objid
     WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relnamespace = 'public'::regnamespace
  LOOP
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', fn.rel);
  END LOOP;
  -- Each computed field: distributed, then (procedural) planned at each call. Order: a SQL
  -- function's body is checked when it is created on a worker, so one that calls another
  -- (balance calls summary) comes after it; PL/pgSQL bodies are not checked, and a SQL function
  -- was created after the functions its body calls (the same check ran here).
  FOR fn IN
    SELECT p.oid::regprocedure AS oid,
           EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid) AS distributed,
           l.lanname NOT IN ('sql', 'internal', 'c')
             AND NOT coalesce('plan_cache_mode=force_custom_plan' = ANY (p.proconfig), false) AS to_plan_per_call
      FROM pg_proc p
      JOIN pg_type t ON t.oid = p.proargtypes[0]
      JOIN pg_dist_partition d ON d.logicalrelid = t.typrelid AND d.partmethod = 'h'
      JOIN pg_language l ON l.oid = p.prolang
     WHERE p.pronargs = 1 AND p.prokind = 'f'
     ORDER BY l.lanname = 'sql', p.oid
  LOOP
    IF NOT fn.distributed THEN
      PERFORM create_distributed_function(fn.oid);
    END IF;
    IF fn.to_plan_per_call THEN
      EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', fn.oid);
    END IF;
  END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION tally.citus_role_secret(text), tally.citus_api_roles() FROM PUBLIC;
