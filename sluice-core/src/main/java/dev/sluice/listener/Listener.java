package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.OwnerId;
import dev.sluice.listener.internal.ListenerEngine;
import java.time.Clock;
import java.time.Duration;
import java.util.List;

/**
 * Delivers every change of a stream to a {@link Handler} with message-queue semantics across a
 * cluster: one active owner per partition (a lease with a fencing token), feed order, at least
 * once, resuming at the last checkpoint after any crash.
 *
 * <pre>{@code
 * try (Listener<BsonDocument> listener = Listener.builder(feed, leaseStore)
 *     .group("order-totals")
 *     .handler((change, fence) -> views.apply(change, fence))
 *     .checkpoint(CheckpointPolicy.every(100, Duration.ofMillis(500)))
 *     .build()
 *     .start()) {
 *   ...
 * }
 * }</pre>
 */
public interface Listener<D> extends AutoCloseable {

  static <D> Builder<D> builder(ChangeFeed<D> feed, LeaseStore leaseStore) {
    return new Builder<>(feed, leaseStore);
  }

  /** Starts competing for the partitions. Returns this listener. */
  Listener<D> start();

  /**
   * Stops delivery, waits for the handler call in progress, commits what was processed (if the
   * lease is still held) and releases the leases so another instance takes over at once.
   */
  @Override
  void close();

  /** This instance's unique owner id ({@code label/pid@host/random}). */
  String owner();

  /** One status per partition, as seen by this instance. */
  List<PartitionStatus> status();

  /** The configuration this listener runs with. */
  ListenerConfig<D> config();

  /** Builder; every setter validates and throws {@link ConfigurationException} naming the value. */
  final class Builder<D> {
    private final ChangeFeed<D> feed;
    private final LeaseStore leaseStore;
    private Handler<D> handler;
    private String group;
    private String owner;
    private int partitions = ListenerSettings.PARTITIONS.defaultValue();
    private Duration leaseDuration = ListenerSettings.LEASE_DURATION.defaultValue();
    private Duration renewInterval;
    private Duration acquireInterval;
    private int concurrency = ListenerSettings.CONCURRENCY.defaultValue();
    private int threads;
    private Duration pollWait;
    private CheckpointPolicy checkpoint = CheckpointPolicy.defaults();
    private BootstrapPolicy bootstrap = BootstrapPolicy.oldest();
    private HistoryLostPolicy historyLost = HistoryLostPolicy.STOP;
    private FailurePolicy failure = FailurePolicy.block(RetryPolicy.defaults());
    private ListenerObserver observer = ListenerObserver.NOOP;
    private Clock clock = Clock.systemUTC();

    private Builder(ChangeFeed<D> feed, LeaseStore leaseStore) {
      this.feed = ConfigurationException.requireNonNull(feed, "feed");
      this.leaseStore = ConfigurationException.requireNonNull(leaseStore, "leaseStore");
    }

    public Builder<D> handler(Handler<D> handler) {
      this.handler = ConfigurationException.requireNonNull(handler, "handler");
      return this;
    }

    /**
     * The consumer group, required: one logical consumer of the stream (an indexer, a relay, a
     * view). Every group gets every change, with its own leases and checkpoints; only members of
     * one group share its partitions. Two applications reading one collection must use two
     * groups; instances of one application use the same group. 1..64 letters, digits, '.', '_'
     * or '-'.
     */
    public Builder<D> group(String group) {
      this.group = ConfigurationException.requireNonNull(group, "group");
      return this;
    }

    /**
     * A label for this instance, shown as the owner in status tools (default: none). It is not
     * the identity: the owner id the lease store compares is always {@code label/pid@host/random},
     * unique to this instance, so two processes given the same label never share a lease.
     */
    public Builder<D> owner(String label) {
      this.owner = OwnerId.validLabel(label, "owner");
      return this;
    }

    /**
     * How many changes of one partition the handler may handle at once; default 1 (one at a time,
     * in feed order). With more, changes of different keys are handled concurrently, never two of
     * the same key, and each key's changes in feed order; the checkpoint moves only to the newest
     * position below which every change is handled (a watermark), so a restart never skips one;
     * parking still parks every later change of a parked key. The handler must then be
     * thread-safe, and its {@link Handler#flush} may run while it handles later changes. Threads:
     * up to this many per {@linkplain #threads thread} of the listener, in addition to those (they
     * end when idle).
     * Refused for handlers whose {@link Handler#concurrentCalls()} is false (Sluice's Kafka and
     * AMQP sinks, which overlap their sends themselves).
     */
    public Builder<D> concurrency(int changesAtOnce) {
      ConfigurationException.require(changesAtOnce >= 1 && changesAtOnce <= ListenerConfig.MAX_CONCURRENCY,
          "concurrency", changesAtOnce, "must be in [1, " + ListenerConfig.MAX_CONCURRENCY + "]");
      this.concurrency = changesAtOnce;
      return this;
    }

    /**
     * How many threads run this listener's partitions, at most. Default: one per partition, up to
     * {@value ListenerConfig#DEFAULT_MAX_THREADS} when the feed's cursors wait for changes without a
     * thread (MongoDB with shared reads, the default), else one per partition (PostgreSQL, MongoDB
     * without shared reads: each of their cursors holds a thread for up to {@link #pollWait} per
     * empty read). A partition takes a thread only while it has something to do (an acquisition
     * attempt, a batch to handle, a commit): standbys, partitions waiting for changes and partitions
     * waiting to retry a failed change hold none (ADR 0075), so a thousand partitions run on a few
     * threads. With fewer threads than partitions that have work at the same moment, they take
     * turns, one batch each; a handler that blocks holds its thread meanwhile.
     */
    public Builder<D> threads(int threads) {
      ConfigurationException.require(threads >= 1 && threads <= ListenerConfig.MAX_PARTITIONS, "threads",
          threads, "must be in [1, " + ListenerConfig.MAX_PARTITIONS + "]");
      this.threads = threads;
      return this;
    }

    /** How many partitions the stream is split into; every instance must use the same number. */
    public Builder<D> partitions(int partitions) {
      ConfigurationException.require(partitions >= 1, "partitions", partitions, "must be >= 1");
      this.partitions = partitions;
      return this;
    }

    /**
     * How long a lease lasts without renewal; the failover time after a crash. Default: {@link
     * ListenerSettings#LEASE_DURATION} (10 s).
     * Renewal defaults to a third of it.
     */
    public Builder<D> leaseDuration(Duration leaseDuration) {
      this.leaseDuration = ConfigurationException.requireNonNull(leaseDuration, "leaseDuration");
      return this;
    }

    public Builder<D> renewInterval(Duration renewInterval) {
      this.renewInterval = ConfigurationException.requireNonNull(renewInterval, "renewInterval");
      return this;
    }

    /** How often an instance without the lease tries to take it. Default: the renew interval. */
    public Builder<D> acquireInterval(Duration acquireInterval) {
      this.acquireInterval = ConfigurationException.requireNonNull(acquireInterval, "acquireInterval");
      return this;
    }

    /** Longest wait of one poll of the feed; at most the renew interval. Default 200 ms, or the renew interval if shorter. */
    public Builder<D> pollWait(Duration pollWait) {
      this.pollWait = ConfigurationException.requireNonNull(pollWait, "pollWait");
      return this;
    }

    public Builder<D> checkpoint(CheckpointPolicy checkpoint) {
      this.checkpoint = ConfigurationException.requireNonNull(checkpoint, "checkpoint");
      return this;
    }

    public Builder<D> bootstrap(BootstrapPolicy bootstrap) {
      this.bootstrap = ConfigurationException.requireNonNull(bootstrap, "bootstrap");
      return this;
    }

    public Builder<D> onHistoryLost(HistoryLostPolicy historyLost) {
      this.historyLost = ConfigurationException.requireNonNull(historyLost, "historyLost");
      return this;
    }

    public Builder<D> onFailure(FailurePolicy failure) {
      this.failure = ConfigurationException.requireNonNull(failure, "failure");
      return this;
    }

    public Builder<D> observer(ListenerObserver observer) {
      this.observer = ConfigurationException.requireNonNull(observer, "observer");
      return this;
    }

    public Builder<D> clock(Clock clock) {
      this.clock = ConfigurationException.requireNonNull(clock, "clock");
      return this;
    }

    /** Validates everything and builds a listener that is not started yet. */
    public Listener<D> build() {
      if (handler == null) {
        throw new ConfigurationException("handler must be set");
      }
      if (group == null) {
        throw new ConfigurationException("group must be set: the consumer group names this"
            + " consumer of stream '" + feed.stream() + "' (for example \"search-indexer\"); two"
            + " consumers with different groups each get every change, members of one group share"
            + " its partitions");
      }
      if (!feed.supports(bootstrap.startPoint())) {
        throw new ConfigurationException("bootstrap " + bootstrap.startPoint() + " is not supported by the"
            + " feed of stream '" + feed.stream() + "' (" + feed.getClass().getSimpleName() + "): it cannot read"
            + " a consistent snapshot of the existing data; bootstrap at oldest, latest or a time");
      }
      if (historyLost == HistoryLostPolicy.RESNAPSHOT && !feed.supports(StartPoint.snapshot())) {
        throw new ConfigurationException("onHistoryLost RESNAPSHOT is not supported by the feed of stream '"
            + feed.stream() + "' (" + feed.getClass().getSimpleName() + "): it cannot read a snapshot of the"
            + " existing data to repair the gap with; use STOP or SKIP_TO_LATEST");
      }
      Duration renew = renewInterval != null ? renewInterval : leaseDuration.dividedBy(3);
      Duration acquire = acquireInterval != null ? acquireInterval : renew;
      String id = OwnerId.unique(owner);
      ChangeFeed<D> grouped = feed.forGroup(group);
      return new EngineListener<>(new ListenerEngine<>(
          new ListenerConfig<>(
              grouped,
              leaseStore,
              handler,
              group,
              id,
              partitions,
              leaseDuration,
              renew,
              acquire,
              pollWait != null ? pollWait : min(DEFAULT_POLL_WAIT, renew),
              checkpoint,
              bootstrap,
              historyLost,
              failure,
              observer,
              clock,
              concurrency,
              threads > 0 ? threads
                  : grouped.cursorsPark() ? Math.min(partitions, ListenerConfig.DEFAULT_MAX_THREADS) : partitions)));
    }

    private static final Duration DEFAULT_POLL_WAIT = Duration.ofMillis(200);

    private static Duration min(Duration a, Duration b) {
      return a.compareTo(b) <= 0 ? a : b;
    }
  }
}
