-- Up Migration
-- tally.publishable_key_active(hash), the server's check of an apikey, is part of the gateway's
-- own state now (sql/gateway/001_gateway_state.sql). This migration stays, empty, so that the
-- names already applied on a database match the files.

-- Down Migration
