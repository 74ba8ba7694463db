package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.StartPoint;
import java.time.Instant;

/**
 * Where a partition starts when it has no checkpoint yet. Whatever the choice, the engine commits
 * the resolved start point as the first checkpoint before delivering anything, so a crash before
 * the first commit cannot move the start (the seed's figure 4b).
 */
public record BootstrapPolicy(StartPoint startPoint) {
  public BootstrapPolicy {
    ConfigurationException.requireNonNull(startPoint, "bootstrap startPoint");
    if (startPoint instanceof StartPoint.After) {
      throw new ConfigurationException(
          "bootstrap startPoint must be oldest, latest, snapshot or a time, but was " + startPoint);
    }
  }

  /**
   * The oldest change the source retains (MongoDB: the oldest oplog entry). The default: no write
   * committed before the listener first started is missed (the seed's figure 4a).
   */
  public static BootstrapPolicy oldest() {
    return new BootstrapPolicy(StartPoint.oldest());
  }

  /** Only changes committed after the first start; earlier ones are deliberately skipped. */
  public static BootstrapPolicy latest() {
    return new BootstrapPolicy(StartPoint.latest());
  }

  /**
   * The rows or documents that exist when the partition first starts, read in one consistent
   * snapshot as {@code SNAPSHOT} changes, then every change after it. Feeds that cannot read such a
   * snapshot (MongoDB's change stream) refuse it when the listener is built.
   */
  public static BootstrapPolicy snapshot() {
    return new BootstrapPolicy(StartPoint.snapshot());
  }

  /** Changes committed at or after {@code time} (must still be in the source's history). */
  public static BootstrapPolicy at(Instant time) {
    return new BootstrapPolicy(StartPoint.at(time));
  }
}
