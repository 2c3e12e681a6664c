-- Up Migration
-- The finance tables: expenses, funds, contacts and their lookup lists. Every tenant table carries workspace_id, has the primary key
-- (workspace_id, id), and every foreign key between tenant tables includes workspace_id, so
-- that a row can never point into another workspace (an RLS policy does not guard a foreign
-- key check) and every table can be distributed by workspace_id.
-- workspace_id defaults to the JWT's claim: a client never sends it and cannot choose another
-- (the RLS policies in policies/ refuse any other value).

-- Lookup lists are rows, not enum types: they grow with an INSERT, without a release.
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

-- The workspace's currency, for the default of funds.currency. SECURITY DEFINER because the
-- API roles cannot read public.workspaces.
CREATE FUNCTION tally.current_workspace_currency() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$ SELECT coalesce((SELECT currency FROM workspaces WHERE id = tally.current_workspace_id()), 'USD') $$;
GRANT EXECUTE ON FUNCTION tally.current_workspace_currency() TO api_read, api_write;

CREATE TABLE public.personal_transactions (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  name         text NOT NULL CONSTRAINT personal_transactions_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  amount       numeric NOT NULL
               CONSTRAINT personal_transactions_amount_positive CHECK (amount > 0)
               CONSTRAINT personal_transactions_amount_bounds CHECK (amount < 1e12 AND scale(amount) <= 4),
  category_id  text NOT NULL REFERENCES public.categories (id),
  method_id    text NOT NULL REFERENCES public.payment_methods (id),
  occurred_at  timestamptz NOT NULL DEFAULT now(),
  note         text CONSTRAINT personal_transactions_note_length CHECK (char_length(note) <= 2000),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id)
);
CREATE INDEX personal_transactions_recent_idx ON public.personal_transactions (workspace_id, occurred_at DESC);
COMMENT ON TABLE public.personal_transactions IS 'Personal expenses of the workspace';

CREATE TABLE public.contacts (
  workspace_id uuid NOT NULL DEFAULT tally.current_workspace_id() REFERENCES public.workspaces (id) ON DELETE CASCADE,
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  name         text NOT NULL CONSTRAINT contacts_name_length CHECK (char_length(name) BETWEEN 1 AND 255),
  nickname     text CONSTRAINT contacts_nickname_length CHECK (char_length(nickname) <= 255),
  phone        text CONSTRAINT contacts_phone_format CHECK (phone ~ '^\+?[0-9 ().-]{3,32}$'),
  email        text CONSTRAINT contacts_email_format CHECK (email ~ '^[^@\s]+@[^@\s]+$' AND char_length(email) <= 320),
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
  start_date             date,
  end_date               date,
  contribution_amount    numeric CONSTRAINT funds_contribution_amount_positive CHECK (contribution_amount > 0),
  contribution_frequency text CONSTRAINT funds_contribution_frequency_check
                         CHECK (contribution_frequency IN ('once', 'weekly', 'monthly', 'quarterly', 'yearly')),
  contribution_due_day   smallint CONSTRAINT funds_contribution_due_day_check CHECK (contribution_due_day BETWEEN 1 AND 31),
  target_amount          numeric CONSTRAINT funds_target_amount_not_negative CHECK (target_amount >= 0),
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
  occurred_at  timestamptz NOT NULL DEFAULT now(),
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

-- An expense must use a category offered to Expenses, a fund transaction one offered to Funds.
-- The foreign key alone cannot say which list, so a trigger checks it and names the field.
CREATE FUNCTION tally.check_category_domain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
  domain text := TG_ARGV[0];
  offered boolean;
BEGIN
  IF NEW.category_id IS NULL THEN
    RETURN NEW; -- NOT NULL reports it, naming the column
  END IF;
  SELECT CASE domain WHEN 'expenses' THEN for_expenses ELSE for_funds END INTO offered
    FROM categories WHERE id = NEW.category_id;
  IF offered IS NULL THEN
    RAISE foreign_key_violation USING
      MESSAGE = format('category_id "%s" is not a known category', NEW.category_id),
      DETAIL = format('Key (category_id)=(%s) is not present in table "categories".', NEW.category_id),
      COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
  ELSIF NOT offered THEN
    RAISE foreign_key_violation USING
      MESSAGE = format('category_id "%s" is not offered to %s', NEW.category_id, domain),
      DETAIL = format('Key (category_id)=(%s) is not a category of %s.', NEW.category_id, domain),
      HINT = format('Read the categories with for_%s = true', domain),
      COLUMN = 'category_id', TABLE = TG_TABLE_NAME,
      CONSTRAINT = TG_TABLE_NAME || '_category_id_fkey';
  END IF;
  RETURN NEW;
END
$$;
GRANT EXECUTE ON FUNCTION tally.check_category_domain() TO api_write;

CREATE TRIGGER personal_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id ON public.personal_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('expenses');
CREATE TRIGGER fund_transactions_category_domain
  BEFORE INSERT OR UPDATE OF category_id ON public.fund_transactions
  FOR EACH ROW EXECUTE FUNCTION tally.check_category_domain('funds');

-- A fund's balance is never stored: it is the sum of its transactions, computed on read.
-- A computed field in PostgREST's sense (a function over the row type): select=*,balance.
-- SECURITY INVOKER, so the caller's RLS applies to the transactions it sums.
CREATE FUNCTION public.balance(public.funds) RETURNS numeric
LANGUAGE sql STABLE
AS $$
  SELECT coalesce(sum(t.amount), 0) FROM public.fund_transactions t
   WHERE t.workspace_id = $1.workspace_id AND t.fund_id = $1.id
$$;

-- Grants: api_read reads the finance tables, api_write (a member of api_read) writes the
-- tenant ones. anon gets nothing. The internal tables of 001 get no grant at all.
GRANT USAGE ON SCHEMA public TO anon, api_read, api_write;
GRANT SELECT ON public.categories, public.payment_methods, public.fund_kinds,
  public.personal_transactions, public.contacts, public.funds, public.fund_transactions,
  public.fund_participants TO api_read;
GRANT INSERT, UPDATE, DELETE ON public.personal_transactions, public.contacts, public.funds,
  public.fund_transactions, public.fund_participants TO api_write;
REVOKE EXECUTE ON FUNCTION public.balance(public.funds) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.balance(public.funds) TO api_read;

-- Down Migration
DROP FUNCTION IF EXISTS public.balance(public.funds);
DROP TABLE IF EXISTS public.fund_participants, public.fund_transactions, public.funds,
  public.contacts, public.personal_transactions, public.fund_kinds, public.payment_methods,
  public.categories;
DROP FUNCTION IF EXISTS tally.check_category_domain();
DROP FUNCTION IF EXISTS tally.current_workspace_currency();
REVOKE USAGE ON SCHEMA public FROM anon, api_read, api_write;
