package dev.sluice.postgres.feed;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * A feed's keep-alive thread, which keeps replication connections alive while nobody reads them:
 * started for the first open stream and ended with the last ({@link #done}), so a feed whose
 * cursors are closed holds no thread.
 */
final class PgKeepAlives {
  private final String stream;
  private ScheduledExecutorService keepAlives;
  private int keepAliveUsers;

  PgKeepAlives(String stream) {
    this.stream = stream;
  }

  /** Runs {@code task} every {@code everyNanos} on the keep-alive thread. */
  synchronized ScheduledFuture<?> schedule(Runnable task, long everyNanos) {
    if (keepAlives == null) {
      keepAlives = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "sluice-pg-keepalive-" + stream);
        t.setDaemon(true);
        return t;
      });
    }
    keepAliveUsers++;
    return keepAlives.scheduleWithFixedDelay(task, everyNanos, everyNanos, TimeUnit.NANOSECONDS);
  }

  /** Cancels a task of {@link #schedule}; the thread ends with the last one. */
  synchronized void done(ScheduledFuture<?> task) {
    task.cancel(false);
    if (--keepAliveUsers == 0) {
      keepAlives.shutdown();
      keepAlives = null;
    }
  }
}
