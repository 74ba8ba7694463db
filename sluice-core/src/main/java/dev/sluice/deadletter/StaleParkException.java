package dev.sluice.deadletter;

import dev.sluice.SluiceException;

/**
 * A park was refused because a later lease epoch has parked in the same stream and partition:
 * the parking owner has lost its lease, whatever its own deadline says. Its change is not lost:
 * the new owner reads it again from the last checkpoint.
 */
public class StaleParkException extends SluiceException {
  private final long epoch;
  private final long latestEpoch;

  public StaleParkException(String stream, int partition, long epoch, long latestEpoch) {
    super("Park refused: epoch " + epoch + " is stale for stream '" + stream + "' partition "
        + partition + ", where epoch " + latestEpoch + " has already parked (the lease was taken"
        + " over)");
    this.epoch = epoch;
    this.latestEpoch = latestEpoch;
  }

  public long epoch() {
    return epoch;
  }

  public long latestEpoch() {
    return latestEpoch;
  }
}
