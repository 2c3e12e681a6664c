-- Run by `tally migrate` on a Citus node at the end of every run, after the migrations, the
-- definitions and the policies have committed, each statement on its own (Citus refuses to
-- distribute a function in the transaction that distributed the table of its argument).
-- Each is idempotent; together they also make a coordinator of a database migrated before it
-- became one.

-- The tables, placed (placement.sql).
SELECT tally.place_tables();
-- The pre-request check and the category trigger, reading the one shard of their tables (shards.sql).
SELECT tally.bind_shards();
-- The API roles' logins on the workers, and the computed fields as distributed objects that plan
-- their statements at each call (api_roles.sql).
SELECT tally.citus_api_roles();
