package dev.sluice.feed;

import java.time.Instant;
import java.util.Objects;

/** Where a feed cursor starts: after a checkpoint, or at a bootstrap point. */
public sealed interface StartPoint {

  /** Resume strictly after a committed position. */
  record After(Position position) implements StartPoint {
    public After {
      Objects.requireNonNull(position, "position");
    }
  }

  /** The oldest change the source still retains (oldest oplog entry, slot start). */
  record Oldest() implements StartPoint {}

  /** Only changes committed after the cursor opened. */
  record Latest() implements StartPoint {}

  /**
   * Every row or document that exists now, as {@link Operation#SNAPSHOT} changes read in one
   * consistent snapshot, then every change committed after that snapshot: nothing missed, nothing
   * applied twice (beyond redelivery after a crash). Only feeds that {@linkplain
   * ChangeFeed#supports support} it.
   */
  record Snapshot() implements StartPoint {}

  /** Changes committed at or after the given source time. */
  record AtTime(Instant time) implements StartPoint {
    public AtTime {
      Objects.requireNonNull(time, "time");
    }
  }

  static StartPoint after(Position position) {
    return new After(position);
  }

  static StartPoint oldest() {
    return new Oldest();
  }

  static StartPoint latest() {
    return new Latest();
  }

  static StartPoint snapshot() {
    return new Snapshot();
  }

  static StartPoint at(Instant time) {
    return new AtTime(time);
  }
}
