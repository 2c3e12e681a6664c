-- Run by `tally migrate` on a Citus node after each migration, in its transaction: the tables a
-- migration made are placed before the next one runs, which may add a foreign key to them
-- (Citus refuses a foreign key from a table it does not manage to one it distributes).
SELECT tally.place_tables();
