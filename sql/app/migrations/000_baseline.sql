-- Up Migration
-- The finance app's tables, indexes, lookup rows and grants, as they stood when the pre-release
-- history was squashed into this file. Its functions, triggers and the activity log's tracking
-- are in sql/app/definitions/, the functions its column defaults call in sql/app/defaults.sql,
-- and the row-level security policies in policies/; `tally migrate` applies them all.
--
-- Tenant tables carry workspace_id, have the primary key (workspace_id, id), and every foreign
-- key between tenant tables includes workspace_id, so that a row can never point into another
-- workspace (an RLS policy does not guard a foreign key check) and every table can be
-- distributed by workspace_id. workspace_id defaults to the JWT's claim.

-- Internal tables that API roles never see: workspaces, the people who sign in, billing and
-- workspace tokens (only the SHA-256 of a token's secret is stored).
CREATE TABLE public.workspaces (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL CONSTRAINT workspaces_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
  currency    text NOT NULL DEFAULT 'USD' CONSTRAINT workspaces_currency_iso4217 CHECK (currency ~ '^[A-Z]{3}$'),
  api_enabled boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX workspaces_name_key ON public.workspaces (lower(name));

-- password_temporary: a password that `tally member add` generated is known to the operator who
-- passed it on; the member must choose their own before the settings page lets them do anything.
CREATE TABLE public.user_credentials (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email              text NOT NULL CONSTRAINT user_credentials_email_format CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
  password_hash      text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  password_temporary boolean NOT NULL DEFAULT false
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

-- Every change the CLI and the settings page make (sql/app/definitions/admin.sql).
CREATE TABLE tally.audit_log (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid REFERENCES public.workspaces (id) ON DELETE CASCADE,
  actor        text NOT NULL,
  action       text NOT NULL,
  details      jsonb NOT NULL DEFAULT '{}',
  at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_workspace_idx ON tally.audit_log (workspace_id, at DESC);

-- Sessions of the settings page. The cookie holds a random secret; only its SHA-256 is stored.
-- The CSRF token of every form of the session is stored beside it.
CREATE TABLE tally.settings_sessions (
  token_hash bytea PRIMARY KEY CONSTRAINT settings_sessions_hash_length CHECK (octet_length(token_hash) = 32),
  user_id    uuid NOT NULL REFERENCES public.user_credentials (id) ON DELETE CASCADE,
  csrf_token text NOT NULL CONSTRAINT settings_sessions_csrf_length CHECK (char_length(csrf_token) BETWEEN 32 AND 128),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX settings_sessions_user_idx ON tally.settings_sessions (user_id);
CREATE INDEX settings_sessions_expires_idx ON tally.settings_sessions (expires_at);

-- Settings sign-in failures, per client address ('addr:<address>') and per address and email
-- ('pair:<address> <lower(email)>', whether or not the email is known, so the answer says
-- nothing about which emails are). Fixed windows; shared by every process on the database.
-- blocked_until: the delay before the key's next attempt is looked at
-- (tally.settings_sign_in_attempt).
CREATE TABLE tally.sign_in_failures (
  key           text PRIMARY KEY CONSTRAINT sign_in_failures_key_length CHECK (char_length(key) <= 400),
  failures      integer NOT NULL,
  window_ends   timestamptz NOT NULL,
  blocked_until timestamptz
);

-- Lookup lists are rows, not enum types: they grow with an INSERT, without a release. Every
-- Tally process notices a change through tally.change_version(), which fingerprints the tables
-- of tally.watched_relations (no trigger: Citus refuses NOTIFY inside its two-phase commit and
-- triggers on reference tables, and PgBouncer in transaction mode drops the notices).
CREATE TABLE public.categories (
  id           text PRIMARY KEY CONSTRAINT categories_id_format CHECK (id ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
  name         text NOT NULL,
  for_expenses boolean NOT NULL DEFAULT false,
  for_funds    boolean NOT NULL DEFAULT false,
  CONSTRAINT categories_offered_somewhere CHECK (for_expenses OR for_funds)
);
COMMENT ON TABLE public.categories IS 'Categories offered to expenses (for_expenses) and/or fund transactions (for_funds)';

CREATE TABLE public.payment_methods (
  id   text PRIMARY KEY CONSTRAINT payment_methods_id_format CHECK (id ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
  name text NOT NULL
);

CREATE TABLE public.fund_kinds (
  id   text PRIMARY KEY CONSTRAINT fund_kinds_id_length CHECK (char_length(id) BETWEEN 1 AND 50),
  name text NOT NULL
);

INSERT INTO public.categories (id, name, for_expenses, for_funds) VALUES
  ('beauty-care',         'Beauty & care',       true,  false),
  ('clothing',            'Clothing',            true,  true),
  ('credit-repayment',    'Credit repayment',    true,  false),
  ('currency-exchange',   'Currency exchange',   false, true),
  ('entertainment',       'Entertainment',       true,  true),
  ('essentials',          'Essentials',          true,  false),
  ('family-support',      'Family support',      true,  false),
  ('fine',                'Fine',                false, true),
  ('fixed-expenses',      'Fixed expenses',      true,  false),
  ('flight-tickets',      'Flight tickets',      false, true),
  ('food-drinks',         'Food & drinks',       true,  true),
  ('fund-income',         'Fund income',         false, true),
  ('hotel',               'Hotel',               false, true),
  ('installment-payment', 'Installment payment', true,  false),
  ('investments',         'Investments',         true,  false),
  ('local-transport',     'Local transport',     true,  true),
  ('other',               'Other',               true,  true),
  ('refund',              'Refund',              false, true),
  ('sports',              'Sports',              true,  false),
  ('travel',              'Travel',              true,  false),
  ('work-expenses',       'Work expenses',       true,  false);

INSERT INTO public.payment_methods (id, name) VALUES
  ('bank-transfer', 'Bank transfer'),
  ('cash',          'Cash'),
  ('credit-card',   'Credit card'),
  ('installment',   'Installment'),
  ('mobile-wallet', 'Mobile wallet');

INSERT INTO public.fund_kinds (id, name) VALUES ('Travel', 'Travel'), ('Badminton', 'Badminton');

INSERT INTO tally.watched_relations (relation)
VALUES ('public.categories'), ('public.payment_methods'), ('public.fund_kinds')
ON CONFLICT DO NOTHING;

-- The finance tables. Every amount is bounded (less than 1e12, at most 4 decimals) and every
-- instant and date finite ('infinity' would sort first on every surface forever), in the
-- database as well as in the field rules of gateway/fields.ts: /rest/v1 has only these
-- (tests/field-rules.test.ts compares the two).
CREATE TABLE public.personal_transactions (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  name         text NOT NULL CONSTRAINT personal_transactions_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  amount       numeric NOT NULL
               CONSTRAINT personal_transactions_amount_positive CHECK (amount > 0)
               CONSTRAINT personal_transactions_amount_bounds CHECK (amount < 1e12 AND scale(amount) <= 4),
  category_id  text NOT NULL REFERENCES public.categories (id),
  method_id    text NOT NULL REFERENCES public.payment_methods (id),
  occurred_at  timestamptz NOT NULL DEFAULT now()
               CONSTRAINT personal_transactions_occurred_at_finite CHECK (isfinite(occurred_at)),
  note         text CONSTRAINT personal_transactions_note_length CHECK (char_length(note) <= 2000),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id)
);
CREATE INDEX personal_transactions_recent_idx ON public.personal_transactions (workspace_id, occurred_at DESC);
COMMENT ON TABLE public.personal_transactions IS 'Personal expenses of the workspace';

-- A contact's email: one @, no blanks, and a domain with at least one dot; letters of any script.
CREATE TABLE public.contacts (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  name         text NOT NULL CONSTRAINT contacts_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  nickname     text CONSTRAINT contacts_nickname_length CHECK (char_length(nickname) <= 255),
  phone        text CONSTRAINT contacts_phone_format CHECK (phone ~ '^\+?[0-9 ().-]{3,32}$'),
  email        text CONSTRAINT contacts_email_format
               CHECK (email ~ '^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$' AND char_length(email) <= 320),
  gender       text CONSTRAINT contacts_gender_length CHECK (char_length(gender) <= 50),
  nationality  text CONSTRAINT contacts_nationality_length CHECK (char_length(nationality) <= 100),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id)
);
CREATE INDEX contacts_name_idx ON public.contacts (workspace_id, lower(name));

-- A contribution schedule is three columns that are all set or all empty: each participant
-- owes contribution_amount every contribution_frequency, due on contribution_due_day (day of
-- the month for monthly/quarterly/yearly, ISO weekday 1-7 for weekly, unused for once).
CREATE TABLE public.funds (
  workspace_id           uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id                     uuid NOT NULL DEFAULT gen_random_uuid(),
  name                   text NOT NULL CONSTRAINT funds_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  kind                   text NOT NULL DEFAULT 'Travel' REFERENCES public.fund_kinds (id),
  status                 text NOT NULL DEFAULT 'Upcoming'
                         CONSTRAINT funds_status_check CHECK (status IN ('Upcoming', 'In Progress', 'Completed')),
  start_date             date CONSTRAINT funds_start_date_finite CHECK (isfinite(start_date)),
  end_date               date CONSTRAINT funds_end_date_finite CHECK (isfinite(end_date)),
  contribution_amount    numeric CONSTRAINT funds_contribution_amount_positive CHECK (contribution_amount > 0)
                         CONSTRAINT funds_contribution_amount_bounds CHECK (contribution_amount < 1e12),
  contribution_frequency text CONSTRAINT funds_contribution_frequency_check
                         CHECK (contribution_frequency IN ('once', 'weekly', 'monthly', 'quarterly', 'yearly')),
  contribution_due_day   smallint CONSTRAINT funds_contribution_due_day_check CHECK (contribution_due_day BETWEEN 1 AND 31),
  target_amount          numeric CONSTRAINT funds_target_amount_not_negative CHECK (target_amount >= 0)
                         CONSTRAINT funds_target_amount_bounds CHECK (target_amount < 1e12),
  currency               text NOT NULL DEFAULT tally.current_workspace_currency()
                         CONSTRAINT funds_currency_iso4217 CHECK (currency ~ '^[A-Z]{3}$'),
  description            text CONSTRAINT funds_description_length CHECK (char_length(description) <= 2000),
  created_at             timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id),
  CONSTRAINT funds_end_not_before_start CHECK (end_date >= start_date),
  CONSTRAINT funds_contribution_schedule_complete CHECK (
    (contribution_amount IS NULL AND contribution_frequency IS NULL AND contribution_due_day IS NULL)
    OR (contribution_amount IS NOT NULL AND contribution_frequency IS NOT NULL
        AND (contribution_frequency = 'once' OR contribution_due_day IS NOT NULL))),
  CONSTRAINT funds_contribution_weekday CHECK (contribution_frequency <> 'weekly' OR contribution_due_day <= 7)
);
CREATE INDEX funds_status_idx ON public.funds (workspace_id, status);

CREATE TABLE public.fund_transactions (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  fund_id      uuid NOT NULL,
  name         text NOT NULL CONSTRAINT fund_transactions_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  amount       numeric NOT NULL
               CONSTRAINT fund_transactions_amount_not_zero CHECK (amount <> 0)
               CONSTRAINT fund_transactions_amount_bounds CHECK (abs(amount) < 1e12 AND scale(amount) <= 4),
  category_id  text NOT NULL REFERENCES public.categories (id),
  method_id    text NOT NULL REFERENCES public.payment_methods (id),
  occurred_at  timestamptz NOT NULL DEFAULT now()
               CONSTRAINT fund_transactions_occurred_at_finite CHECK (isfinite(occurred_at)),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id),
  CONSTRAINT fund_transactions_fund_id_fkey FOREIGN KEY (workspace_id, fund_id)
    REFERENCES public.funds (workspace_id, id) ON DELETE CASCADE
);
CREATE INDEX fund_transactions_fund_recent_idx ON public.fund_transactions (workspace_id, fund_id, occurred_at DESC);
CREATE INDEX fund_transactions_recent_idx ON public.fund_transactions (workspace_id, occurred_at DESC);

CREATE TABLE public.fund_participants (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  fund_id      uuid NOT NULL,
  contact_id   uuid NOT NULL,
  joined_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, fund_id, contact_id),
  CONSTRAINT fund_participants_fund_id_fkey FOREIGN KEY (workspace_id, fund_id)
    REFERENCES public.funds (workspace_id, id) ON DELETE CASCADE,
  CONSTRAINT fund_participants_contact_id_fkey FOREIGN KEY (workspace_id, contact_id)
    REFERENCES public.contacts (workspace_id, id) ON DELETE CASCADE
);
CREATE INDEX fund_participants_contact_idx ON public.fund_participants (workspace_id, contact_id);

-- A fund's figures, computed in one place for every surface (public.summary(funds) and the
-- functions over it in sql/app/definitions/funds.sql): a composite type, so that the functions
-- compose over /rpc like a table.
CREATE TYPE public.fund_figures AS (
  fund_id           uuid,
  balance           numeric,
  income            numeric,
  expenses          numeric,
  progress          numeric,
  participant_count integer
);
COMMENT ON TYPE public.fund_figures IS 'A fund''s balance, income, expenses (a positive number), progress to target (null without target) and participant count';

-- The activity log: every insert, update and delete of a workspace's records, written by a
-- trigger in the transaction of the change (sql/app/definitions/activity.sql). A workspace reads
-- its own (policies/activity.sql); no API role can write it.
--
-- No foreign key to workspaces: on a Citus coordinator a new table linked to a reference table
-- becomes a Citus local table, which refuses RLS policies; the Citus placement distributes this
-- one with the other workspace tables, so a workspace's activity lives on the shard of its records.
CREATE TABLE public.activity (
  workspace_id  uuid NOT NULL,
  id            uuid NOT NULL DEFAULT gen_random_uuid(),
  at            timestamptz NOT NULL DEFAULT clock_timestamp(),
  table_name    text NOT NULL,
  -- The record's key without workspace_id: its id, or the key's values joined by '/'.
  record_id     text NOT NULL,
  action        text NOT NULL CONSTRAINT activity_action_check CHECK (action IN ('insert', 'update', 'delete')),
  before        jsonb,
  after         jsonb,
  -- Who: a workspace token (its id, scope and label), a signed-in member, or SQL run in the database.
  actor         text NOT NULL CONSTRAINT activity_actor_check CHECK (actor IN ('token', 'member', 'database')),
  token_id      uuid,
  scope         text,
  member        text,
  surface       text NOT NULL CONSTRAINT activity_surface_check
                CHECK (surface IN ('rest', 'api', 'mcp', 'settings', 'database')),
  -- The change this one undid (public.undo_change), if it was an undo.
  undo_of       uuid,
  transaction_id bigint NOT NULL DEFAULT txid_current(),
  token_name    text,
  PRIMARY KEY (workspace_id, id)
);
CREATE INDEX activity_recent_idx ON public.activity (workspace_id, at DESC);
CREATE INDEX activity_record_idx ON public.activity (workspace_id, table_name, record_id, at DESC);
COMMENT ON TABLE public.activity IS 'Every change of the workspace''s records: what, before and after, when, and who';
COMMENT ON COLUMN public.activity.token_name IS 'The label of the workspace token that made the change, as it was then';

-- Idempotency keys: a create sent again with the same Idempotency-Key answers what the first
-- answered and writes nothing (sql/app/definitions/idempotency.sql). Keys belong to a workspace
-- and live in schema tally, which no surface exposes. No foreign key to workspaces, for the
-- reason the activity log gives; the Citus placement colocates it with the tenant tables.
CREATE TABLE tally.idempotency_keys (
  workspace_id uuid NOT NULL,
  key          text NOT NULL CONSTRAINT idempotency_keys_key_check CHECK (key ~ '^[!-~]{1,255}$'),
  -- A digest of the request the key was first sent with: the same key with another request is refused.
  fingerprint  text NOT NULL,
  -- The response, stored by the transaction that claimed the key.
  status       integer,
  headers      jsonb,
  body         text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON tally.idempotency_keys (created_at);
COMMENT ON TABLE tally.idempotency_keys IS 'The response of each create sent with an Idempotency-Key, per workspace, for 24 hours';

-- Closed until their files in policies/ open a workspace's own rows (`tally migrate` applies
-- them in the same run).
ALTER TABLE public.activity ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.activity FORCE ROW LEVEL SECURITY;
ALTER TABLE tally.idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE tally.idempotency_keys FORCE ROW LEVEL SECURITY;

-- Grants: api_read reads the finance tables, api_write (a member of api_read) writes the tenant
-- ones. anon gets nothing; the internal tables get no grant at all. A contact's gender and
-- nationality are set on create only (column privileges: an UPDATE naming them is a 42501).
GRANT USAGE ON SCHEMA public TO anon, api_read, api_write;
GRANT SELECT ON public.categories, public.payment_methods, public.fund_kinds,
  public.personal_transactions, public.contacts, public.funds, public.fund_transactions,
  public.fund_participants, public.activity TO api_read;
GRANT INSERT, UPDATE, DELETE ON public.personal_transactions, public.funds,
  public.fund_transactions, public.fund_participants TO api_write;
GRANT INSERT, DELETE ON public.contacts TO api_write;
GRANT UPDATE (workspace_id, id, name, nickname, phone, email, created_at) ON public.contacts TO api_write;
GRANT SELECT, INSERT, UPDATE ON tally.idempotency_keys TO api_write;

-- Down Migration
-- The app's functions (those of sql/app/defaults.sql and sql/app/definitions/, and of the
-- Citus folder where it ran) go with it: every function of schemas public and tally but the
-- gateway's, which its own set's down removes.
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname IN ('public', 'tally')
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
       AND p.oid::regprocedure::text NOT IN ('tally.jwt_claims()', 'tally.publishable_key_active(bytea)',
         'tally.rate_limit_take(text,integer,integer)', 'tally.rate_limit_take_if_fits(text,integer,integer,integer)',
         'tally.rate_limit_undo(text)', 'tally.rate_limit_reset(text)', 'tally.rate_limit_get(text)',
         'tally.set_login_password(text,text)', 'tally.schema_changed()', 'tally.bump_schema_version()',
         'tally.change_version()')
  LOOP
    EXECUTE format('DROP FUNCTION %s CASCADE', f);
  END LOOP;
END
$$;
DROP TABLE IF EXISTS tally.idempotency_keys, public.activity, public.fund_participants, public.fund_transactions,
  public.funds, public.contacts, public.personal_transactions, public.fund_kinds, public.payment_methods,
  public.categories, tally.sign_in_failures, tally.settings_sessions, tally.audit_log, public.api_tokens,
  public.billing_accounts, public.workspace_members, public.user_credentials, public.workspaces;
DROP TYPE IF EXISTS public.fund_figures;
DELETE FROM tally.watched_relations WHERE to_regclass(relation::text) IS NULL;
REVOKE USAGE ON SCHEMA public FROM anon, api_read, api_write;
