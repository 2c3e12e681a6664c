-- Idempotency keys (tally.idempotency_keys, of the baseline migration): a create sent again with
-- the same Idempotency-Key (an agent retrying after a timeout) answers what the first answered
-- and writes nothing. The gateway claims the key in the transaction of the write, before the
-- write (tally.idempotency_claim), and stores the response in it, before COMMIT
-- (tally.idempotency_save): a key is recorded exactly when its write is. A request that comes
-- while another with its key is still running waits on the primary key until that one commits
-- (then it answers the stored response) or rolls back (then it claims the key itself): the
-- database decides, whatever process serves which request.
--
-- The write role may read, claim and complete its own workspace's keys only
-- (policies/idempotency_keys.sql, RLS forced), and nothing else: the functions run as the
-- caller, not as their owner, because on Citus a transaction may not touch a shard as two users
-- (the claim's owner, then the write's role). A key is kept for 24 hours; then a request with it
-- is a new request, and tally.prune_idempotency_keys() deletes it.

-- Claims the key for this request, or answers what was stored for it. One row: claimed (the
-- key is new, or its record expired: go on and write), or the stored fingerprint and response
-- (an in-flight claim of another transaction is waited for on the primary key first). The
-- insert names the workspace, so Citus sends it to that workspace's shard.
CREATE OR REPLACE FUNCTION tally.idempotency_claim(idempotency_key text, request_fingerprint text)
RETURNS TABLE (claimed boolean, stored_fingerprint text, stored_status integer, stored_headers jsonb, stored_body text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ws uuid := tally.current_workspace_id();
  -- Values, not now() or timestamp arithmetic in the statement: Citus takes only IMMUTABLE
  -- functions in the ON CONFLICT clause of a distributed table.
  claimed_at timestamptz := now();
  expired_before timestamptz := claimed_at - interval '24 hours';
BEGIN
  IF ws IS NULL THEN
    RAISE SQLSTATE '42501' USING MESSAGE = 'An idempotency key belongs to a workspace, and this request names none';
  END IF;
  -- Twice at most: the stored row may be pruned between the insert and the read.
  FOR attempt IN 1..2 LOOP
    INSERT INTO tally.idempotency_keys (workspace_id, key, fingerprint, created_at)
    VALUES (ws, idempotency_key, request_fingerprint, claimed_at)
    ON CONFLICT (workspace_id, key) DO UPDATE
      SET fingerprint = excluded.fingerprint, status = NULL, headers = NULL, body = NULL, created_at = claimed_at
      WHERE tally.idempotency_keys.created_at < expired_before
    RETURNING true INTO claimed;
    IF FOUND THEN
      RETURN NEXT;
      RETURN;
    END IF;
    claimed := false;
    SELECT k.fingerprint, k.status, k.headers, k.body
      INTO stored_fingerprint, stored_status, stored_headers, stored_body
      FROM tally.idempotency_keys k
     WHERE k.workspace_id = ws AND k.key = idempotency_key;
    IF FOUND THEN
      RETURN NEXT;
      RETURN;
    END IF;
  END LOOP;
  RAISE SQLSTATE '40001' USING MESSAGE = 'The idempotency key could not be claimed; retry the request';
END
$$;

-- Stores the response of the request that claimed the key, in its transaction.
CREATE OR REPLACE FUNCTION tally.idempotency_save(idempotency_key text, response_status integer, response_headers jsonb,
                                       response_body text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  -- A value: Citus routes the statement by it (and refuses the claims' function inside it).
  ws uuid := tally.current_workspace_id();
BEGIN
  UPDATE tally.idempotency_keys
     SET status = response_status, headers = response_headers, body = response_body
   WHERE workspace_id = ws AND key = idempotency_key;
END
$$;

REVOKE EXECUTE ON FUNCTION tally.idempotency_claim(text, text), tally.idempotency_save(text, integer, jsonb, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.idempotency_claim(text, text), tally.idempotency_save(text, integer, jsonb, text)
  TO api_write;

-- Deletes the keys older than 24 hours (the server runs it with the activity log's sweep). One
-- DELETE, not a data-modifying WITH: Citus has a distributed plan for it.
CREATE OR REPLACE FUNCTION tally.prune_idempotency_keys() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  gone bigint;
BEGIN
  DELETE FROM tally.idempotency_keys WHERE created_at < now() - interval '24 hours';
  GET DIAGNOSTICS gone = ROW_COUNT;
  RETURN gone;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.prune_idempotency_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.prune_idempotency_keys() TO authenticator;
