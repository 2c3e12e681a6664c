-- Where each table lives on a Citus coordinator (the citus extension installed and workers
-- added); on a node that is not one, tally.place_tables() returns at once.
--
-- * Tenant tables (schema public, a workspace_id column, readable by an API role) are
--   hash-distributed on workspace_id and colocated: one workspace's rows of every tenant table
--   are on one worker, so a request of one workspace can run on one shard.
-- * The tables a tenant table references that have no workspace_id (workspaces and the lookup
--   lists) are reference tables: a copy on every node, so the foreign keys and the category
--   trigger are checked on the worker that holds the row.
-- * Internal tables stay on the coordinator: the ones in the foreign-key graph of workspaces
--   (api_tokens, workspace_members, user_credentials, billing_accounts, tally.audit_log,
--   tally.settings_sessions) become Citus local tables, as Citus requires for a foreign key to a
--   reference table; the others (tally.rate_limits, tally.sign_in_failures, publishable_keys)
--   stay plain tables. Not reference tables: they are written on many requests (the rate limit
--   on every one, last_used_at, the audit log, sessions, sign-in counters), and a write to a
--   reference table is a two-phase commit on every node. On the coordinator, the pre-request
--   check and the token exchange join them with the coordinator's copy of workspaces without
--   touching a worker.
--
-- `tally migrate` runs tally.place_tables() after each migration and at the end of every run
-- (this folder's after-each-migration.sql and after-migrate.sql), so a database that became a
-- coordinator after it was migrated, or a tenant table a later migration adds, is placed too.

-- A Citus coordinator with at least one worker: where tables are distributed, and where a
-- policy may not hold a sub-select (tally.workspace_isolation asks).
CREATE OR REPLACE FUNCTION tally.citus_coordinator() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    RETURN false;
  END IF;
  RETURN citus_is_coordinator()
     AND EXISTS (SELECT 1 FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive);
END
$$;

-- The tables placed with the workspaces' records: the tenant tables, and the idempotency keys and
-- the workspaces' usage of their budgets, which no API role reads but which are written in the
-- transactions of those records, so they must live on the same shard.
CREATE OR REPLACE FUNCTION tally.tenant_tables() RETURNS SETOF regclass
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT c.oid::regclass
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE (n.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'workspace_id' AND NOT a.attisdropped)
          AND EXISTS (SELECT 1 FROM unnest(ARRAY['anon', 'api_read', 'api_write']) r(role)
                       WHERE has_table_privilege(r.role, c.oid, 'SELECT, INSERT, UPDATE, DELETE')))
      OR c.oid IN (to_regclass('tally.idempotency_keys'), to_regclass('tally.workspace_usage'))
   ORDER BY c.oid
$$;

-- PL/pgSQL resolves the names of a statement when it first runs it, so Citus's catalog and
-- functions are named here as they are, and on a node that is not a coordinator no statement
-- naming them is reached. citus.enable_unsafe_triggers: the category trigger of the transaction
-- tables then runs on the shard that holds the row; it reads only the row and reference tables
-- (categories, payment_methods), which every node holds, so it is safe there.
CREATE OR REPLACE FUNCTION tally.place_tables() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET citus.enable_unsafe_triggers = on
AS $$
DECLARE
  -- Names, not oids: undistribute_table (below) makes a table anew.
  tenants text[];
  refs text[];
  anchor text;
  t text;
  fk record;
BEGIN
  IF NOT tally.citus_coordinator() THEN
    RETURN;
  END IF;
  SELECT coalesce(array_agg(x.rel::text) FILTER (WHERE p.logicalrelid IS NULL), '{}'),
         (array_agg(x.rel::text) FILTER (WHERE p.logicalrelid IS NOT NULL))[1]
    INTO tenants, anchor
    FROM tally.tenant_tables() x (rel)
    LEFT JOIN pg_dist_partition p ON p.logicalrelid = x.rel AND p.partmethod = 'h';
  SELECT coalesce(array_agg(DISTINCT f.confrelid::regclass::text), '{}') INTO refs
    FROM pg_constraint f
   WHERE f.contype = 'f' AND f.conrelid IN (SELECT tally.tenant_tables())
     AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = f.confrelid AND a.attname = 'workspace_id' AND NOT a.attisdropped)
     AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = f.confrelid AND p.repmodel = 't');
  IF cardinality(tenants) = 0 AND cardinality(refs) = 0 THEN
    RETURN;
  END IF;

  -- The policy in the form Citus accepts, before the table is distributed.
  FOREACH t IN ARRAY tenants LOOP
    IF EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = t::regclass AND p.polname = 'workspace_isolation') THEN
      PERFORM tally.workspace_isolation(t::regclass);
    END IF;
  END LOOP;

  -- Foreign keys that touch a table being placed are dropped and made again afterwards: Citus
  -- distributes a table only when what it references is placed, and turns every local table a
  -- new reference table is linked with into a Citus local table (which refuses RLS policies).
  CREATE TEMPORARY TABLE tally_placed_fks ON COMMIT DROP AS
    SELECT f.conrelid::regclass::text AS rel, f.conname, pg_get_constraintdef(f.oid) AS def
      FROM pg_constraint f
     WHERE f.contype = 'f'
       AND (f.conrelid = ANY ((tenants || refs)::regclass[]) OR f.confrelid = ANY ((tenants || refs)::regclass[]));
  FOR fk IN SELECT * FROM tally_placed_fks LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.rel, fk.conname);
  END LOOP;

  FOREACH t IN ARRAY refs LOOP
    PERFORM create_reference_table(t::regclass);
  END LOOP;
  FOREACH t IN ARRAY tenants LOOP
    -- A table a later migration created with a foreign key to a reference table was made a
    -- Citus local table then; it is distributed from a plain table.
    PERFORM undistribute_table(t::regclass) FROM pg_dist_partition p WHERE p.logicalrelid = t::regclass;
    PERFORM create_distributed_table(t::regclass, 'workspace_id', colocate_with => coalesce(anchor, 'none'));
    anchor := coalesce(anchor, t);
  END LOOP;

  FOR fk IN SELECT * FROM tally_placed_fks LOOP
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.rel, fk.conname, fk.def);
  END LOOP;
  DROP TABLE tally_placed_fks;
END
$$;

REVOKE EXECUTE ON FUNCTION tally.citus_coordinator(), tally.tenant_tables(), tally.place_tables() FROM PUBLIC;
