-- Row-level security for tally.idempotency_keys: only its owner reads and writes it, through
-- tally.idempotency_claim and tally.idempotency_save (sql/163_idempotency_keys.sql; both run as
-- the owner, which forced RLS holds to this policy) and the 24-hour sweep. No API role has a
-- privilege on it or a policy: a key's record is neither readable nor writable by any request.
-- The policy has no subquery: Citus accepts it on a distributed table as it is.
-- Idempotent: `tally policies apply` re-runs it.
ALTER TABLE tally.idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE tally.idempotency_keys FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS idempotency_keys_kept_by_owner ON tally.idempotency_keys;
CREATE POLICY idempotency_keys_kept_by_owner ON tally.idempotency_keys FOR ALL TO CURRENT_USER
  USING (true) WITH CHECK (true);
