-- The claims of the request's JWT, as the gateway sets them for the transaction.
CREATE OR REPLACE FUNCTION tally.jwt_claims() RETURNS jsonb
LANGUAGE sql STABLE
AS $$ SELECT coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb $$;
REVOKE EXECUTE ON FUNCTION tally.jwt_claims() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tally.jwt_claims() TO anon, api_read, api_write;
