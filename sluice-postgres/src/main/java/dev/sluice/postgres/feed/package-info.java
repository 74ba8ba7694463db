/**
 * The PostgreSQL change feed ({@link dev.sluice.postgres.feed.PostgresChangeFeed}, the public API,
 * an interface built by its {@code builder(...)}) and what goes with it: {@link
 * dev.sluice.postgres.feed.PostgresDocuments} (the rows' JSON form for sinks and dead-letter
 * stores), {@link dev.sluice.postgres.feed.PostgresFeedMetrics} (slot gauges) and {@link
 * dev.sluice.postgres.feed.ReplicationSockets} (public only because pgjdbc instantiates it by
 * name; not for applications). The implementation is package-private, one class per concern
 * (ADR 0118):
 * <ul>
 *   <li>{@code PostgresChangeFeedImpl}: the feed's settings, its slot names and slot
 *       administration; opens one {@code PgFeedCursor} per partition;
 *   <li>{@code PgFeedCursor}: one partition's read, from its start through the snapshot to the
 *       stream, and its acknowledgements;
 *   <li>{@code PgStartPosition}, {@code PgSlot}, {@code PgSlotStream}, {@code PgKeepAlives}: where
 *       a read starts, the replication slot, its stream and the keep-alive while nobody reads
 *       (ADR 0063, 0065, 0106);
 *   <li>{@code PgSnapshot}, {@code PgSnapshotRead}, {@code PgCovers}: the snapshot bootstrap and
 *       the key ranges it covers after a restart (ADR 0064);
 *   <li>{@code PgOutput}, {@code PgRowDecoder}, {@code PgValues}, {@code Unconvertible}: pgoutput
 *       decoding and the values' Java types (ADR 0090-0094);
 *   <li>{@code PgPosition}: positions inside and between transactions;
 *   <li>{@code PgCatalog}, {@code PgPublicationCheck}, {@code PgCurrentRows}, {@code
 *       PgConnections}: catalog queries, the server check, the current rows and the connections
 *       the feed opens (ADR 0107).
 * </ul>
 */
package dev.sluice.postgres.feed;
