-- Sluice lease/lock table for PostgreSQL. SqlLeaseStore runs this on first use (table name
-- substituted for sluice_lease); run it yourself if the application may not create tables.
-- Expiry is judged with the database's clock (now()), never the application's.
CREATE TABLE IF NOT EXISTS sluice_lease (
  name            VARCHAR(255) NOT NULL PRIMARY KEY, -- lock:<name> or <stream>#<partition>
  owner           VARCHAR(255),                      -- NULL once released
  epoch           BIGINT       NOT NULL,             -- fencing token: max(+1, clock in micros)
  expires_at      TIMESTAMP WITH TIME ZONE,          -- NULL once released
  version         BIGINT       NOT NULL,             -- compare-and-swap counter, +1 per write
  checkpoint      TEXT,                              -- listener checkpoint (Position.token)
  checkpoint_time TIMESTAMP WITH TIME ZONE           -- Position.time
)
-- With SqlLeaseStore.Builder.sessionLiveness (ADR 0114) the store records each holder's database
-- session; where it may change the table it adds these columns itself, else run:
-- ALTER TABLE sluice_lease ADD COLUMN IF NOT EXISTS holder_pid INTEGER,
--   ADD COLUMN IF NOT EXISTS holder_since TIMESTAMP WITH TIME ZONE,
--   ADD COLUMN IF NOT EXISTS holder_bound_ms BIGINT, ADD COLUMN IF NOT EXISTS holder_epoch BIGINT
