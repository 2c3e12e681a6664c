-- Up Migration
-- The bound of an amount's decimals (scale(amount) <= 4, the CHECKs *_amount_bounds) in words, so
-- that /rest/v1's OpenAPI documents say it as the MCP tools and /api/v1 do: no JSON Schema keyword
-- states it for every validator (multipleOf 0.0001 is computed in floating point).
COMMENT ON COLUMN public.personal_transactions.amount IS 'In the workspace currency, greater than 0, below 10^12, at most 4 decimals';
COMMENT ON COLUMN public.fund_transactions.amount IS 'In the fund currency: positive for income, negative for an expense, never 0; below 10^12 either way, at most 4 decimals';

-- Down Migration
COMMENT ON COLUMN public.personal_transactions.amount IS NULL;
COMMENT ON COLUMN public.fund_transactions.amount IS NULL;
