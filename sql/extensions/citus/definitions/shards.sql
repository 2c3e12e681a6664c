-- On a Citus node, the pre-request check (tally.check_request) and the category trigger
-- (tally.check_category_domain) read the one shard of each table they look up, not the table:
-- a statement naming a table Citus manages is handed to Citus, which plans it anew on every call
-- (it refuses generic plans for them) and runs it through its local execution. Measured on a
-- 3-node cluster (one loaded two-core machine): the check's reads cost 0.09-0.10 ms through
-- Citus, 0.009 ms on the shards; a category read 0.07 ms by EXECUTE after a look-up of the
-- shard, 0.005 ms on the shard in a plain statement.
--
-- Those tables (api_tokens, a Citus local table; workspaces, categories, payment_methods,
-- reference tables) have one shard each, with the same id on every node that holds it, and it
-- never moves: a rebalance moves only the shards of distributed tables. tally.bind_shards()
-- makes, on every node, a view in schema tally_shard named like each table, over its shard
-- where the node holds it, and puts tally_shard before public in the two functions' search_path.
-- Their text stays the one of sql/app/definitions/ and reads the tables by their plain names;
-- PL/pgSQL keeps their plans. A node without the shard (a worker, for api_tokens; a node added
-- later, until the next `tally migrate`) has no such view, and the name finds the table, read
-- through Citus as before. It runs after every `tally migrate` (after-migrate.sql): the
-- placement may be new, and a definition applied again has its search_path back.
CREATE OR REPLACE FUNCTION tally.bind_shards() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t record;
  failed text;
BEGIN
  IF NOT tally.citus_coordinator() THEN
    RETURN;
  END IF;
  FOR t IN
    SELECT c.relname AS name, format('%I.%I', n.nspname, c.relname || '_' || s.shardid) AS shard,
           -- The roles that may read the table may read its view (the category trigger runs as
           -- whoever writes the row); the check runs as the owner, who owns the views.
           (SELECT 'GRANT SELECT ON tally_shard.' || quote_ident(c.relname) || ' TO '
                   || string_agg(quote_ident(a.grantee::regrole::text), ', ') || ';'
              FROM aclexplode(c.relacl) a
             WHERE a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner) AS grants
      FROM pg_dist_partition p
      JOIN pg_dist_shard s ON s.logicalrelid = p.logicalrelid
      JOIN pg_class c ON c.oid = p.logicalrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE p.logicalrelid IN ('public.api_tokens'::regclass, 'public.workspaces'::regclass,
                              'public.categories'::regclass, 'public.payment_methods'::regclass)
       AND p.partmethod = 'n'
       -- Citus shortens a shard's name past 63 bytes: then the table itself is read.
       AND octet_length(c.relname || '_' || s.shardid) <= 63
  LOOP
    -- On each node by itself (Citus would otherwise pass the DDL on): the view where the shard is.
    SELECT string_agg(r.result, '; ') INTO failed
      FROM run_command_on_all_nodes(format($command$
        DO $do$
        BEGIN
          PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
          CREATE SCHEMA IF NOT EXISTS tally_shard;
          GRANT USAGE ON SCHEMA tally_shard TO PUBLIC;
          DROP VIEW IF EXISTS tally_shard.%1$I;
          IF to_regclass(%2$L) IS NOT NULL THEN
            CREATE VIEW tally_shard.%1$I AS SELECT * FROM %2$s;
            %3$s
          END IF;
        END
        $do$ $command$, t.name, t.shard, coalesce(t.grants, ''))) r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
      RAISE EXCEPTION 'could not make the view of % on every node: %', t.shard, failed;
    END IF;
  END LOOP;
  ALTER FUNCTION tally.check_request() SET search_path = pg_catalog, tally_shard, public, pg_temp;
  ALTER FUNCTION tally.check_category_domain() SET search_path = pg_catalog, tally_shard, public, pg_temp;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.bind_shards() FROM PUBLIC;
