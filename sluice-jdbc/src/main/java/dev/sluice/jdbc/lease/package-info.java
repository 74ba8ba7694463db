/**
 * The SQL lease store ({@link dev.sluice.jdbc.lease.SqlLeaseStore}, the public API: an interface
 * extending {@link dev.sluice.lease.LeaseStore}, built by its {@code builder(DataSource)}) on
 * PostgreSQL and MariaDB/MySQL. Its implementation is one package-private class per concern
 * (ADR 0118):
 * <ul>
 *   <li>{@code SqlLeaseStoreImpl}: the store's operations, putting the parts below together;
 *   <li>{@code AcquireStrategy}: how a lease is taken, {@code UpsertAcquire} (one statement,
 *       ADR 0072) or {@code ReadThenWriteAcquire} (seed 002's transaction, ADR 0021);
 *   <li>{@code CasTransactions}: the REPEATABLE READ compare-and-swap transaction that renewals,
 *       checkpoint commits and the read-then-write acquisition run in (ADR 0021, 0070);
 *   <li>{@code LeaseStatements}: the SQL on the table (read, insert, compare-and-swap update,
 *       release, conditional delete) and how the table stores time;
 *   <li>{@code SqlDialect}: what differs between PostgreSQL and MariaDB/MySQL (clock, time types,
 *       race error codes, the upsert, the transaction guard, the DDL resource);
 *   <li>{@code LeaseTable}: the schema: the dialect detected, the table created, on first use;
 *   <li>{@code ReleaseNotices} and {@code PostgresReleaseWatch}: release notices on PostgreSQL
 *       ({@code pg_notify} / {@code LISTEN}, ADR 0061);
 *   <li>{@code SessionLiveness} (the holder's database session, confirmed alive),
 *       {@code GoneSessions} (the sessions a standby found gone) and {@code SessionAcquire} (the
 *       acquisition that records the session and may take a lease whose holder's session is gone):
 *       the opt-in session liveness, with {@code SessionSql} for what differs between PostgreSQL
 *       and MariaDB (ADR 0114);
 *   <li>{@code SqlFailures}: a lost race, or a failure that is retryable or not (ADR 0007);
 *   <li>{@code LeaseCalls}: one call on a pooled connection, bounded by the JDBC network timeout
 *       (ADR 0101).
 * </ul>
 */
package dev.sluice.jdbc.lease;
