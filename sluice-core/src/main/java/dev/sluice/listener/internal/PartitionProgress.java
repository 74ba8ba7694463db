package dev.sluice.listener.internal;

import dev.sluice.feed.Position;
import dev.sluice.feed.SourceHistory;
import dev.sluice.lease.Lease;
import java.time.Duration;
import java.time.Instant;

/**
 * What a partition's status reports of its progress: the epoch it holds, the checkpoint committed,
 * the newest change read, the last change processed, and whether it caught up with the source.
 * The tenure running the partition tells it as it goes (and the renewal thread, when the lease is
 * lost); {@link PartitionWorker#status()} reads it from any thread. Each field is volatile and read
 * on its own: no reader relies on two of them changing together.
 */
final class PartitionProgress {
  private volatile long heldEpoch;
  private volatile Position committed;
  private volatile Position newestRead;
  /** The position of the last change processed by the current tenure (or the cursor's progress). */
  private volatile Position processedTo;
  /** Whether the current tenure processed everything the source had at its last read. */
  private volatile boolean caughtUp;

  /** A tenure starts from {@code checkpoint}: processed up to it, and not known to be caught up. */
  void startedAt(Position checkpoint) {
    processedTo = checkpoint;
    caughtUp = false;
  }

  /** The tenure's lease is held from now: its epoch, and the checkpoint it was granted with. */
  void holding(Lease lease) {
    heldEpoch = lease.epoch();
    committed = lease.checkpoint();
  }

  /** The lease is no longer held (lost, or the tenure ended); the last checkpoint stays reported. */
  void notHolding() {
    heldEpoch = 0;
  }

  /** The checkpoint {@code position} was committed. */
  void committed(Position position) {
    committed = position;
  }

  /** A change at {@code position} is being delivered: read, so not caught up. */
  void delivering(Position position) {
    newestRead = position;
    caughtUp = false;
  }

  /** Everything up to {@code position} is processed. */
  void processedTo(Position position) {
    processedTo = position;
  }

  /** Everything up to {@code position} is processed; {@code caughtUp} if the source had no more. */
  void processedTo(Position position, boolean caughtUp) {
    processedTo = position;
    this.caughtUp = caughtUp;
  }

  long heldEpoch() {
    return heldEpoch;
  }

  Position committed() {
    return committed;
  }

  /**
   * The newest change the source has (as it last said, or as read, whichever is newer) minus the
   * last change processed; zero once everything the source had at the last read is processed.
   */
  Duration lag(SourceHistory history) {
    Position p = processedTo;
    if (caughtUp || p == null || p.time() == null) {
      return Duration.ZERO;
    }
    Instant newest = history.newest();
    Position n = newestRead;
    if (n != null && n.time() != null && (newest == null || n.time().isAfter(newest))) {
      newest = n.time();
    }
    return newest == null ? Duration.ZERO : max(Duration.between(p.time(), newest), Duration.ZERO);
  }

  static Duration max(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }
}
