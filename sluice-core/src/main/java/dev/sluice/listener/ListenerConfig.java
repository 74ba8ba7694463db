package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;

/**
 * The validated, immutable configuration of a {@link Listener}; built by {@link
 * Listener.Builder}.
 */
public record ListenerConfig<D>(
    ChangeFeed<D> feed,
    LeaseStore leaseStore,
    Handler<D> handler,
    String group,
    String owner,
    int partitions,
    Duration leaseDuration,
    Duration renewInterval,
    Duration acquireInterval,
    Duration pollWait,
    CheckpointPolicy checkpoint,
    BootstrapPolicy bootstrap,
    HistoryLostPolicy historyLost,
    FailurePolicy failure,
    ListenerObserver observer,
    Clock clock,
    int concurrency,
    int threads) {

  /**
   * Largest partition count a listener accepts, whatever its feed: every member keeps a worker per
   * partition of the group (held or not; they share {@link #threads} threads), and a lease record each.
   */
  public static final int MAX_PARTITIONS = 4_096;

  /**
   * Default of {@link Listener.Builder#threads} on a feed whose cursors park: one per partition, up
   * to this many (one per partition otherwise).
   */
  public static final int DEFAULT_MAX_THREADS = 64;

  /** Largest {@link Listener.Builder#concurrency}: changes handled at once per partition. */
  public static final int MAX_CONCURRENCY = 256;

  /** Shortest lease a listener accepts: shorter ones expire between two store round trips. */
  public static final Duration MIN_LEASE = Duration.ofSeconds(1);

  private static final java.util.regex.Pattern GROUP = java.util.regex.Pattern.compile("[A-Za-z0-9._-]{1,64}");
  /** What a consumer group name may be, for error messages. */
  public static final String GROUP_RULE = "must be 1..64 letters, digits, '.', '_' or '-'";

  /** Whether {@code group} is a valid consumer group name ({@link #GROUP_RULE}). */
  public static boolean validGroup(String group) {
    return group != null && GROUP.matcher(group).matches();
  }

  public ListenerConfig {
    ConfigurationException.requireNonNull(feed, "feed");
    ConfigurationException.requireNonNull(group, "group");
    ConfigurationException.require(validGroup(group), "group", "'" + group + "'", GROUP_RULE);
    String stream = feed.stream();
    ConfigurationException.require(stream != null && !stream.isBlank() && stream.length() <= 150
            && stream.indexOf('#') < 0 && stream.indexOf('@') < 0 && stream.indexOf('/') < 0,
        "stream", "'" + stream + "'",
        "must be 1..150 characters without '#', '@' or '/' (they separate the parts of lease names)");
    ConfigurationException.requireNonNull(leaseStore, "leaseStore");
    ConfigurationException.requireNonNull(handler, "handler");
    ConfigurationException.requireNonNull(owner, "owner");
    ConfigurationException.require(!owner.isBlank(), "owner", "'" + owner + "'", "must not be blank");
    ConfigurationException.require(partitions >= 1, "partitions", partitions, "must be >= 1");
    ConfigurationException.require(partitions <= MAX_PARTITIONS, "partitions", partitions,
        "must be <= " + MAX_PARTITIONS + ": every member keeps a worker and a lease record per partition of the group");
    ConfigurationException.require(
        partitions <= feed.maxPartitions(),
        "partitions",
        partitions,
        "must be <= " + feed.maxPartitions() + " for feed " + feed.stream());
    positive(leaseDuration, "leaseDuration");
    ConfigurationException.require(leaseDuration.compareTo(MIN_LEASE) >= 0, "leaseDuration",
        leaseDuration, "must be at least " + MIN_LEASE + ": a shorter lease expires between two"
            + " round trips to the store, and two owners would handle the same changes");
    positive(renewInterval, "renewInterval");
    positive(acquireInterval, "acquireInterval");
    positive(pollWait, "pollWait");
    ConfigurationException.require(
        renewInterval.multipliedBy(3).compareTo(leaseDuration) <= 0,
        "renewInterval",
        renewInterval,
        "must be at most a third of leaseDuration " + leaseDuration
            + " so that two renewals can fail in a row without losing the lease");
    ConfigurationException.require(
        pollWait.compareTo(renewInterval) <= 0,
        "pollWait",
        pollWait,
        "must be <= renewInterval " + renewInterval);
    ConfigurationException.requireNonNull(checkpoint, "checkpoint");
    ConfigurationException.requireNonNull(bootstrap, "bootstrap");
    ConfigurationException.requireNonNull(historyLost, "historyLost");
    ConfigurationException.requireNonNull(failure, "failure");
    ConfigurationException.requireNonNull(observer, "observer");
    ConfigurationException.requireNonNull(clock, "clock");
    ConfigurationException.require(concurrency >= 1 && concurrency <= MAX_CONCURRENCY, "concurrency", concurrency,
        "must be in [1, " + MAX_CONCURRENCY + "]");
    ConfigurationException.require(threads >= 1 && threads <= MAX_PARTITIONS, "threads", threads,
        "must be in [1, " + MAX_PARTITIONS + "]");
    ConfigurationException.require(concurrency == 1 || handler.concurrentCalls(), "concurrency", concurrency,
        "must be 1 for handler " + handler + ": it handles one change at a time per partition (a sink that"
            + " overlaps its sends itself says so)");
  }

  private static void positive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    ConfigurationException.require(!d.isNegative() && !d.isZero(), name, d, "must be positive");
  }

  /**
   * The lease name of a partition: {@code group/stream#<index>of<partitions>}. The group keeps
   * independent consumers of one stream apart; the partition count makes a listener configured
   * with another count see the group's records as foreign instead of sharing them (see {@link
   * #partitionPrefix()}).
   */
  public String leaseName(int partition) {
    return leaseName(group, feed.stream(), partition, partitions);
  }

  /** The lease name of partition {@code partition} of {@code partitions} of {@code group} on {@code stream}. */
  public static String leaseName(String group, String stream, int partition, int partitions) {
    return group + "/" + stream + "#" + partition + "of" + partitions;
  }

  /** The prefix of every partition lease of this group and stream, whatever the partition count. */
  public String partitionPrefix() {
    return group + "/" + feed.stream() + "#";
  }

  /**
   * The scope of this group's dead letters, {@code group/stream}: each consumer group of a stream
   * parks, blocks and replays only its own changes, even in a shared dead-letter store.
   */
  public String deadLetterScope() {
    return group + "/" + feed.stream();
  }

  /** The prefix of the membership records of this group and stream. */
  public String memberPrefix() {
    return group + "/" + feed.stream() + "@member:";
  }
}
