package dev.sluice.feed;

/**
 * SPI: a backend's change feed for one stream (a MongoDB collection change stream, a PostgreSQL
 * publication read through a replication slot).
 *
 * <p>Implementations are thread-safe factories; each {@link FeedCursor} they open is used by one
 * thread at a time. See {@code docs/adr/0004-feed-spi.md}.
 *
 * @param <D> the backend's document type
 */
public interface ChangeFeed<D> {

  /** The stream name: part of every lease name and checkpoint. */
  String stream();

  /**
   * The largest number of partitions this feed can serve (a MongoDB change stream and a PostgreSQL
   * publication, read through a slot per partition, have no limit of their own).
   */
  default int maxPartitions() {
    return Integer.MAX_VALUE;
  }

  /**
   * Whether this feed's cursors wait for changes without a thread ({@link
   * FeedCursor#wakeInsteadOfWaiting}). The listener's default thread count depends on it: bounded
   * when they do, one per partition when they do not (each would hold a thread in its polls).
   */
  default boolean cursorsPark() {
    return false;
  }

  /**
   * Asks the source how much history it retains and how far it has got. The engine calls it every
   * few seconds from a thread of the listener's own (never a partition's), for the lag and
   * history-window figures; it is a network call, bounded like any other read of the source, and
   * may throw when the source cannot be reached (the figures then stay as they were). The default
   * knows nothing.
   */
  default SourceHistory history() {
    return SourceHistory.UNKNOWN;
  }

  /**
   * The feed as consumer group {@code group} reads it. A feed that keeps reading state on the
   * source for each consumer (PostgreSQL: a replication slot, which has one confirmed position)
   * returns a copy whose state is the group's own, so that two groups reading one stream never
   * share it; the listener calls this once when it is built. The default returns this feed.
   */
  default ChangeFeed<D> forGroup(String group) {
    return this;
  }

  /**
   * What the group's partitions of a layout of {@code partitions} partitions keep on the source
   * besides their lease records, for the error that refuses a change of partition count to name
   * (PostgreSQL: the layout's replication slots, which keep WAL until dropped). Empty when the
   * feed keeps nothing; the default.
   */
  default String keptByLayout(int partitions) {
    return "";
  }

  /**
   * Whether cursors can start at {@code start}. Only feeds that can read a consistent snapshot of
   * the existing data support {@link StartPoint.Snapshot}; the listener refuses a bootstrap its
   * feed does not support when it is built.
   */
  default boolean supports(StartPoint start) {
    return !(start instanceof StartPoint.Snapshot);
  }

  /**
   * Opens a cursor for one partition.
   *
   * @throws HistoryLostException if {@code start} is a position the source no longer retains
   * @throws FeedException if the source cannot be reached or rejects the request
   */
  FeedCursor<D> open(PartitionSpec partition, StartPoint start);
}
