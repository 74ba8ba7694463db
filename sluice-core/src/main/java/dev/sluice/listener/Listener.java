package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.internal.ListenerEngine;
import java.lang.management.ManagementFactory;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.UUID;

/**
 * Delivers every change of a stream to a {@link Handler} with message-queue semantics across a
 * cluster: one active owner per partition (a lease with a fencing token), feed order, at least
 * once, resuming at the last checkpoint after any crash.
 *
 * <pre>{@code
 * try (Listener<BsonDocument> listener = Listener.builder(feed, leaseStore)
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

  /** This instance's unique owner id. */
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
    private String owner;
    private int partitions = 1;
    private Duration leaseDuration = Duration.ofSeconds(10);
    private Duration renewInterval;
    private Duration acquireInterval;
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

    /** A unique id of this instance; default host, pid and a random suffix. */
    public Builder<D> owner(String owner) {
      this.owner = ConfigurationException.requireNonNull(owner, "owner");
      return this;
    }

    /** How many partitions the stream is split into; every instance must use the same number. */
    public Builder<D> partitions(int partitions) {
      ConfigurationException.require(partitions >= 1, "partitions", partitions, "must be >= 1");
      this.partitions = partitions;
      return this;
    }

    /**
     * How long a lease lasts without renewal; the failover time after a crash. Default 10 s.
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
      Duration renew = renewInterval != null ? renewInterval : leaseDuration.dividedBy(3);
      Duration acquire = acquireInterval != null ? acquireInterval : renew;
      String id = owner != null ? owner : defaultOwner();
      return new ListenerEngine<>(
          new ListenerConfig<>(
              feed,
              leaseStore,
              handler,
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
              clock));
    }

    private static final Duration DEFAULT_POLL_WAIT = Duration.ofMillis(200);

    private static Duration min(Duration a, Duration b) {
      return a.compareTo(b) <= 0 ? a : b;
    }

    private static String defaultOwner() {
      String jvm = ManagementFactory.getRuntimeMXBean().getName(); // pid@host
      return jvm + "-" + UUID.randomUUID().toString().substring(0, 8);
    }
  }
}
