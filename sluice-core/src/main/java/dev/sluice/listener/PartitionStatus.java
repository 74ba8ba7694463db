package dev.sluice.listener;

import dev.sluice.feed.Position;
import java.time.Duration;
import java.time.Instant;

/**
 * A snapshot of one partition as seen by one listener instance.
 *
 * @param lease the lease name
 * @param state the state
 * @param epoch the epoch held, or 0 if not held
 * @param processed changes handled successfully by this instance, all epochs together
 * @param committed the last position this instance committed, or null
 * @param lag source time of the newest change read minus source time of the last committed
 *     change; {@link Duration#ZERO} when caught up or unknown
 * @param error the last error of this partition (why it is FAILED, BLOCKED or LOST, or the
 *     last one it recovered from), or null if none happened
 * @param errorAt when {@code error} happened (this process's clock), or null
 * @param recentLosses leases of this partition lost by this instance in the last {@link
 *     #RECENT}; see {@link #flapping()}
 * @param restarts how often the partition was restarted after an unexpected error
 */
public record PartitionStatus(
    String lease,
    PartitionState state,
    long epoch,
    long processed,
    Position committed,
    Duration lag,
    String error,
    Instant errorAt,
    int recentLosses,
    int restarts) {

  /** The window {@link #recentLosses()} counts over. */
  public static final Duration RECENT = Duration.ofMinutes(15);

  /**
   * Whether this instance keeps losing the lease (three or more losses in {@link #RECENT}):
   * renewals that do not get through in time, a peer with the same partitions configured
   * differently, or a store whose clock jumps. Worth an alert even while the state says ACTIVE.
   */
  public boolean flapping() {
    return recentLosses >= 3;
  }
}
