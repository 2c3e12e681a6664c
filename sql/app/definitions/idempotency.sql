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

-- Stores the response of the request that claimed the key, in its transaction, and counts what
-- the record takes against the workspace's budget for its keys (tally.count_keys). A key claimed
-- again after it expired holds its old answer's count until now: the difference is counted.
CREATE OR REPLACE FUNCTION tally.idempotency_save(idempotency_key text, response_status integer, response_headers jsonb,
                                       response_body text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  -- A value: Citus routes the statement by it (and refuses the claims' function inside it).
  ws uuid := tally.current_workspace_id();
  claims jsonb := tally.jwt_claims();
  -- The answer, the key, and 150 for the row's other columns (its fingerprint among them).
  size integer := octet_length(idempotency_key) + octet_length(coalesce(response_headers::text, ''))
                  + octet_length(coalesce(response_body, '')) + 150;
  counted integer;
BEGIN
  SELECT k.bytes INTO counted FROM tally.idempotency_keys k WHERE k.workspace_id = ws AND k.key = idempotency_key;
  UPDATE tally.idempotency_keys
     SET status = response_status, headers = response_headers, body = response_body, bytes = size
   WHERE workspace_id = ws AND key = idempotency_key;
  PERFORM tally.count_keys(ws, idempotency_key, size - coalesce(counted, 0),
                           CASE WHEN claims ->> 'idempotency_budget' ~ '^[0-9]{1,18}$'
                                THEN (claims ->> 'idempotency_budget')::bigint END);
END
$$;

REVOKE EXECUTE ON FUNCTION tally.idempotency_claim(text, text), tally.idempotency_save(text, integer, jsonb, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.idempotency_claim(text, text), tally.idempotency_save(text, integer, jsonb, text)
  TO api_write;

-- Counts `added` bytes of the record of `idempotency_key` against the budget of workspace `ws`
-- for its keys (the claim `idempotency_budget` the server sets; none: counted, never refused).
-- The keys of the last 24 hours hold at most the budget: a keyed write whose answer would take
-- them past is refused, nothing of it written, with a Retry-After of when enough of them expire.
-- A key is never dropped before its 24 hours to make room, since a retry with it would then
-- write twice. The count holds the expired keys the hourly sweep has not deleted yet, so past
-- the budget the keys of the last 24 hours are added up before anything is refused.
CREATE OR REPLACE FUNCTION tally.count_keys(ws uuid, idempotency_key text, added bigint, budget bigint) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  total bigint;
  live bigint;
  frees timestamptz;
BEGIN
  total := (tally.add_usage(ws, 0, added)).key_total;
  IF budget IS NULL OR total <= budget OR added <= 0 THEN
    RETURN;
  END IF;
  SELECT coalesce(sum(k.bytes), 0) INTO live FROM tally.idempotency_keys k
   WHERE k.workspace_id = ws AND k.created_at >= now() - interval '24 hours';
  IF live <= budget THEN
    RETURN;
  END IF;
  SELECT x.created_at INTO frees
    FROM (SELECT k.created_at, sum(k.bytes) OVER (ORDER BY k.created_at, k.key) AS freed FROM tally.idempotency_keys k
           WHERE k.workspace_id = ws AND k.created_at >= now() - interval '24 hours' AND k.key <> idempotency_key) x
   WHERE x.freed >= live - budget ORDER BY x.created_at LIMIT 1;
  IF frees IS NULL THEN
    PERFORM tally.refuse('PT413', 413,
      format('This request''s answer takes %s bytes, more than the budget of the workspace''s idempotency keys (%s bytes)',
             added, budget),
      'Nothing was written', 'Ask for a smaller answer (Prefer: return=minimal), or send it without Idempotency-Key');
  END IF;
  PERFORM tally.refuse('PT429', 429,
    format('The idempotency keys of this workspace are full: the answers of the last 24 hours would take %s bytes with this one, its budget is %s',
           live, budget),
    'Nothing was written. A key keeps its answer for 24 hours, so that a retry with it never writes twice',
    'Retry after the seconds of Retry-After (when older keys expire), ask for a smaller answer (Prefer: return=minimal), or send it without Idempotency-Key',
    jsonb_build_object('Retry-After', greatest(ceil(extract(epoch FROM frees + interval '24 hours' - now())), 1)::bigint::text));
END
$$;
REVOKE EXECUTE ON FUNCTION tally.count_keys(uuid, text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.count_keys(uuid, text, bigint, bigint) TO api_write;

-- Deletes the keys older than 24 hours (the server runs it with the activity log's hourly
-- sweep), and subtracts them from their workspaces' counts. A DELETE per workspace, not a
-- data-modifying WITH: Citus routes each to the workspace's shard.
CREATE OR REPLACE FUNCTION tally.prune_idempotency_keys() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cutoff timestamptz := now() - interval '24 hours';
  ws uuid;
  size integer;
  freed bigint;
  gone bigint := 0;
BEGIN
  FOR ws IN SELECT DISTINCT k.workspace_id FROM tally.idempotency_keys k WHERE k.created_at < cutoff LOOP
    freed := 0;
    FOR size IN DELETE FROM tally.idempotency_keys k WHERE k.workspace_id = ws AND k.created_at < cutoff
                RETURNING k.bytes LOOP
      freed := freed + size;
      gone := gone + 1;
    END LOOP;
    -- From the workspace's first slot: its sum is what counts.
    UPDATE tally.workspace_usage u SET key_bytes = u.key_bytes - freed WHERE u.workspace_id = ws AND u.slot = 0;
  END LOOP;
  RETURN gone;
END
$$;
REVOKE EXECUTE ON FUNCTION tally.prune_idempotency_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.prune_idempotency_keys() TO authenticator;
