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
    Clock clock) {

  public ListenerConfig {
    ConfigurationException.requireNonNull(feed, "feed");
    ConfigurationException.requireNonNull(leaseStore, "leaseStore");
    ConfigurationException.requireNonNull(handler, "handler");
    ConfigurationException.requireNonNull(owner, "owner");
    ConfigurationException.require(!owner.isBlank(), "owner", "'" + owner + "'", "must not be blank");
    ConfigurationException.require(partitions >= 1, "partitions", partitions, "must be >= 1");
    ConfigurationException.require(
        partitions <= feed.maxPartitions(),
        "partitions",
        partitions,
        "must be <= " + feed.maxPartitions() + " for feed " + feed.stream());
    positive(leaseDuration, "leaseDuration");
    positive(renewInterval, "renewInterval");
    positive(acquireInterval, "acquireInterval");
    positive(pollWait, "pollWait");
    ConfigurationException.require(
        renewInterval.multipliedBy(2).compareTo(leaseDuration) <= 0,
        "renewInterval",
        renewInterval,
        "must be at most half of leaseDuration " + leaseDuration
            + " so that one failed renewal does not lose the lease");
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
  }

  private static void positive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    ConfigurationException.require(!d.isNegative() && !d.isZero(), name, d, "must be positive");
  }

  /** The lease name of a partition: {@code stream#index}. */
  public String leaseName(int partition) {
    return feed.stream() + "#" + partition;
  }
}
