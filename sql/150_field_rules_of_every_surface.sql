-- Up Migration
-- The field rules of /api/v1 and MCP (gateway/fields.ts) and these constraints, all that
-- /rest/v1 has, now say the same of every value (tests/field-rules.test.ts compares them):
--
-- 1. A contact's email: one @, no blanks, and a domain with at least one dot; letters of any
--    script allowed. fields.ts checked JSON Schema's ASCII-only email format while this
--    constraint took any domain, so zoë@example.com and ann@localhost had different answers on
--    /rest/v1. Now the first is accepted and the second refused on every surface.
-- 2. A fund's start_date and end_date are real days: 'infinity' was refused by the field rules
--    (not a date) and stored by /rest/v1.
--
-- NOT VALID: rows already stored are the operator's to fix; every new write is checked.
ALTER TABLE public.contacts DROP CONSTRAINT contacts_email_format;
ALTER TABLE public.contacts
  ADD CONSTRAINT contacts_email_format
  CHECK (email ~ '^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$' AND char_length(email) <= 320) NOT VALID;
-- One constraint per statement: Citus refuses ADD CONSTRAINT beside other subcommands.
ALTER TABLE public.funds ADD CONSTRAINT funds_start_date_finite CHECK (isfinite(start_date)) NOT VALID;
ALTER TABLE public.funds ADD CONSTRAINT funds_end_date_finite CHECK (isfinite(end_date)) NOT VALID;

-- Down Migration
ALTER TABLE public.funds DROP CONSTRAINT IF EXISTS funds_end_date_finite;
ALTER TABLE public.funds DROP CONSTRAINT IF EXISTS funds_start_date_finite;
ALTER TABLE public.contacts DROP CONSTRAINT contacts_email_format;
ALTER TABLE public.contacts
  ADD CONSTRAINT contacts_email_format CHECK (email ~ '^[^@\s]+@[^@\s]+$' AND char_length(email) <= 320) NOT VALID;
