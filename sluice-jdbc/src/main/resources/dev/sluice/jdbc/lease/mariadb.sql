-- Sluice lease/lock table for MariaDB and MySQL (InnoDB). SqlLeaseStore runs this on first use
-- (table name substituted for sluice_lease); run it yourself if the application may not create
-- tables. Times are UTC (UTC_TIMESTAMP(6)), judged with the database's clock.
CREATE TABLE IF NOT EXISTS sluice_lease (
  name            VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  owner           VARCHAR(255) NULL,
  epoch           BIGINT       NOT NULL,
  expires_at      DATETIME(6)  NULL,
  version         BIGINT       NOT NULL,
  checkpoint      TEXT         NULL,
  checkpoint_time DATETIME(6)  NULL
) ENGINE=InnoDB
-- With SqlLeaseStore.Builder.sessionLiveness (ADR 0114, MariaDB 10.5 or later) the store records
-- each holder's database session; where it may change the table it adds these columns itself,
-- else run:
-- ALTER TABLE sluice_lease ADD COLUMN IF NOT EXISTS holder_pid BIGINT,
--   ADD COLUMN IF NOT EXISTS holder_since DATETIME(6),
--   ADD COLUMN IF NOT EXISTS holder_bound_ms BIGINT, ADD COLUMN IF NOT EXISTS holder_epoch BIGINT
