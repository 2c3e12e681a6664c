-- Up Migration
-- A fund's target and contribution amounts have the bound every amount has (less than 1e12), in
-- the database as well as in the field rules: /rest/v1 has no field rules, and it now writes the
-- number a client sent exactly (1e400 was Infinity in JavaScript, and stored as NULL). NOT VALID:
-- rows already stored are the operator's to fix; every new write is checked.
ALTER TABLE public.funds
  ADD CONSTRAINT funds_target_amount_bounds CHECK (target_amount < 1e12) NOT VALID,
  ADD CONSTRAINT funds_contribution_amount_bounds CHECK (contribution_amount < 1e12) NOT VALID;

-- Down Migration
ALTER TABLE public.funds
  DROP CONSTRAINT IF EXISTS funds_contribution_amount_bounds,
  DROP CONSTRAINT IF EXISTS funds_target_amount_bounds;
