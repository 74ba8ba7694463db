package dev.sluice.listener.internal;

import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.SourceHistory;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source's retained history as last asked ({@link ChangeFeed#history()}), shared by the
 * partitions of one listener for their lag and history-window figures. Asked on a thread of its
 * own every {@link #INTERVAL}, so the figures move while a handler is stuck (the lag of a blocked
 * partition grows) and a slow answer delays neither delivery nor lease renewal. Never throws: an
 * unreachable source leaves the last answer in place (the feed's own reads report the outage).
 */
final class SourceProbe {
  private static final Logger log = LoggerFactory.getLogger(SourceProbe.class);
  static final Duration INTERVAL = Duration.ofSeconds(2);

  private final ChangeFeed<?> feed;
  private volatile SourceHistory last = SourceHistory.UNKNOWN;

  SourceProbe(ChangeFeed<?> feed) {
    this.feed = feed;
  }

  SourceHistory last() {
    return last;
  }

  void refresh() {
    try {
      last = feed.history();
    } catch (RuntimeException e) {
      log.debug("Cannot ask {} for its history (lag and history window stay as last known): {}",
          feed.stream(), e.toString());
    }
  }
}
