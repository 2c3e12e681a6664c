-- Up Migration
-- On a Citus coordinator, tally.citus_api_roles() (091) also makes every computed field a
-- distributed object: a function of a distributed table's row (summary(funds), balance(funds))
-- is called on the workers, inside the query on the shard, so it must exist there; Citus copies
-- a function to every node once it is one. A function created before its table was distributed
-- (balance, by 002 and 051) was not copied, and every read selecting it failed on the worker
-- with "function public.balance(funds) does not exist". Nothing on plain Postgres.
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
    IF NOT EXISTS (SELECT 1 FROM pg_dist_authinfo a WHERE a.nodeid = 0 AND a.rolename = api_role) THEN
      secret := encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex');
      EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', api_role, secret);
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
  -- Order: a SQL function's body is checked when it is created on a worker, so one that calls
  -- another (balance calls summary) comes after it; PL/pgSQL bodies are not checked, and a SQL
  -- function was created after the functions its body calls (the same check ran here).
  FOR fn IN
    SELECT p.oid::regprocedure AS oid
      FROM pg_proc p
      JOIN pg_type t ON t.oid = p.proargtypes[0]
      JOIN pg_dist_partition d ON d.logicalrelid = t.typrelid AND d.partmethod = 'h'
     WHERE p.pronargs = 1 AND p.prokind = 'f'
       AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
     ORDER BY p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'sql'), p.oid
  LOOP
    PERFORM create_distributed_function(fn.oid);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.citus_api_roles() FROM PUBLIC;

-- Not called here: `tally migrate` calls it after every run, once the tables are placed and
-- committed (Citus refuses to distribute a function in the transaction that distributed the
-- table of its argument: "current transaction is aborted" on the worker).

-- Down Migration
-- The computed fields stay distributed objects (harmless: they exist on every node); 091's
-- definition of the function comes back.
CREATE OR REPLACE FUNCTION tally.citus_api_roles() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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
