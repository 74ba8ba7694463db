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
 * @param lag how far behind the source this partition's processing is: the source time of the
 *     newest change available (the newest the source reports, or the newest read) minus the source
 *     time of the last change processed; {@link Duration#ZERO} when the partition has processed
 *     everything the source had at its last read (a caught-up idle listener), when this instance
 *     does not hold the partition, or when the source gives no times. Resolution: the source's
 *     change times (MongoDB cluster time: seconds)
 * @param error the last error of this partition (why it is FAILED, BLOCKED or LOST, or the
 *     last one it recovered from), or null if none happened
 * @param errorAt when {@code error} happened (this process's clock), or null
 * @param recentLosses leases of this partition lost by this instance in the last {@link
 *     #RECENT}; see {@link #flapping()}
 * @param restarts how often the partition was restarted after an unexpected error
 * @param historyLeft how much older than the committed checkpoint the source's oldest retained
 *     change is: the time left before a restart at the checkpoint finds its history gone (MongoDB:
 *     the checkpoint's distance from the oplog's oldest entry; {@link Duration#ZERO} once it fell
 *     out); null when unknown (the source does not tell, or this instance holds no checkpoint)
 * @param attempts failures in a row of what the partition is retrying (reading the feed,
 *     committing, parking, or handling one change while {@link PartitionState#RETRYING} or
 *     {@link PartitionState#BLOCKED}, reaching the lease store while {@link
 *     PartitionState#ACQUIRING}); 0 once it succeeded
 * @param nextAttemptAt when the next try of it is due (this process's clock), or null when
 *     nothing is being retried
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
    int restarts,
    Duration historyLeft,
    int attempts,
    Instant nextAttemptAt) {

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
