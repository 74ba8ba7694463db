package dev.sluice.listener;

import dev.sluice.feed.Position;
import java.time.Duration;

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
 * @param error the reason for {@link PartitionState#FAILED} or {@link PartitionState#LOST}, or null
 */
public record PartitionStatus(
    String lease,
    PartitionState state,
    long epoch,
    long processed,
    Position committed,
    Duration lag,
    String error) {}
