-- Up Migration
-- The finance app's internal tables that API roles never see, its workspace claim and its
-- pre-request check. The roles and schema `tally` are the gateway's own state
-- (sql/gateway/001_gateway_state.sql, which runs first).

CREATE TABLE public.workspaces (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL CONSTRAINT workspaces_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
  currency    text NOT NULL DEFAULT 'USD' CONSTRAINT workspaces_currency_iso4217 CHECK (currency ~ '^[A-Z]{3}$'),
  api_enabled boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX workspaces_name_key ON public.workspaces (lower(name));

CREATE TABLE public.user_credentials (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email         text NOT NULL CONSTRAINT user_credentials_email_format CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
  password_hash text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX user_credentials_email_key ON public.user_credentials (lower(email));

CREATE TABLE public.workspace_members (
  workspace_id uuid NOT NULL REFERENCES public.workspaces (id) ON DELETE CASCADE,
  user_id      uuid NOT NULL REFERENCES public.user_credentials (id) ON DELETE CASCADE,
  role         text NOT NULL CONSTRAINT workspace_members_role_check CHECK (role IN ('owner', 'admin', 'member')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, user_id)
);

CREATE TABLE public.billing_accounts (
  workspace_id  uuid PRIMARY KEY REFERENCES public.workspaces (id) ON DELETE CASCADE,
  plan          text NOT NULL DEFAULT 'free',
  billing_email text,
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- Workspace tokens: only the SHA-256 of the secret is stored.
CREATE TABLE public.api_tokens (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES public.workspaces (id) ON DELETE CASCADE,
  label        text NOT NULL DEFAULT '' CONSTRAINT api_tokens_label_length CHECK (char_length(label) <= 200),
  scope        text NOT NULL CONSTRAINT api_tokens_scope_check CHECK (scope IN ('read', 'write')),
  token_hash   bytea NOT NULL UNIQUE CONSTRAINT api_tokens_hash_length CHECK (octet_length(token_hash) = 32),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_tokens_workspace_idx ON public.api_tokens (workspace_id);

-- The workspace of the request; NULL without a JWT, so that RLS lets no row through.
CREATE FUNCTION tally.current_workspace_id() RETURNS uuid
LANGUAGE sql STABLE
AS $$ SELECT nullif(tally.jwt_claims() ->> 'workspace_id', '')::uuid $$;

GRANT EXECUTE ON FUNCTION tally.current_workspace_id() TO anon, api_read, api_write;

-- The pre-request check, run in every request's transaction. A JWT outlives neither the
-- revocation of its workspace token nor the workspace's API switch: both are read here, on
-- every request, so they act on the very next one. SQLSTATE PT401/PT403 carry the HTTP
-- status, as PostgREST's convention for raised errors has it.
CREATE FUNCTION tally.check_request() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
  claims jsonb := tally.jwt_claims();
  token_id uuid;
  token record;
BEGIN
  IF claims ->> 'sub' IS NULL THEN
    RETURN; -- no JWT (anon) or a JWT not minted from a workspace token: nothing to check
  END IF;
  BEGIN
    token_id := (claims ->> 'sub')::uuid;
  EXCEPTION WHEN invalid_text_representation THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The access token does not belong to a workspace token',
      HINT = 'Exchange a workspace token at /api/v1/token for a new access token';
  END;
  SELECT t.revoked_at, t.workspace_id, w.api_enabled INTO token
    FROM api_tokens t JOIN workspaces w ON w.id = t.workspace_id
   WHERE t.id = token_id;
  IF NOT FOUND OR token.revoked_at IS NOT NULL
     OR token.workspace_id::text IS DISTINCT FROM claims ->> 'workspace_id' THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'The workspace token behind this access token has been revoked',
      HINT = 'Ask a workspace owner for a new workspace token';
  END IF;
  IF NOT token.api_enabled THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'API access is switched off for this workspace',
      HINT = 'A workspace owner can switch it on in the workspace settings';
  END IF;
END
$$;
GRANT EXECUTE ON FUNCTION tally.check_request() TO anon, api_read, api_write;

-- Down Migration
DROP FUNCTION IF EXISTS tally.check_request(), tally.current_workspace_id();
DROP TABLE IF EXISTS public.api_tokens, public.billing_accounts,
  public.workspace_members, public.user_credentials, public.workspaces;
