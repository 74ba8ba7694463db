package dev.sluice.mongodb.view;

import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.listener.ListenerObserver;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** See {@link MaterializedView#rebuildOnHistoryLost}. */
final class HistoryLostRebuild implements ListenerObserver {
  private static final Logger LOG = LoggerFactory.getLogger(HistoryLostRebuild.class);

  private final List<MaterializedView> views;
  /** A rebuild is asked for and has not started yet. */
  private final AtomicBoolean pending = new AtomicBoolean();
  private final AtomicLong rebuilds = new AtomicLong();

  HistoryLostRebuild(List<MaterializedView> views) {
    this.views = List.copyOf(views);
  }

  @Override
  public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
    if (resumedAt == null || !pending.compareAndSet(false, true)) {
      return; // STOP: nothing goes on; or a rebuild that has not started yet covers this report too
    }
    Thread t = new Thread(this::rebuild, "sluice-view-rebuild");
    t.setDaemon(true);
    t.start();
  }

  private void rebuild() {
    pending.set(false); // a report from now on gets a rebuild after this one
    for (MaterializedView view : views) {
      try {
        long recomputed = view.rebuild();
        LOG.warn("View '{}' rebuilt after lost history ({} target documents recomputed): targets of source"
            + " documents deleted during the gap are gone now", view.definition().target(), recomputed);
      } catch (RuntimeException e) {
        LOG.error("View '{}': the rebuild after lost history failed; rebuild it by hand"
            + " (MaterializedView.rebuild())", view.definition().target(), e);
      }
    }
    rebuilds.incrementAndGet();
  }

  /** How many rebuilds ran to their end. */
  long rebuilds() {
    return rebuilds.get();
  }
}
