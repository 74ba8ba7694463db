package dev.sluice.app.service;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Closes things side by side, each on a daemon thread of its own, and waits for them together at
 * most a bound (docs/adr/0103). A close still running past it (a call to a server that keeps the
 * connection open and never answers) goes on in the background, ends within its own call's bound,
 * and never keeps the process alive.
 */
final class BoundedClose {
  private BoundedClose() {
  }

  /**
   * Runs every close of {@code closes} (by thread name) at once and waits for all of them until
   * {@code bound} has passed.
   *
   * @return the names of the closes still running then, in the order given
   */
  static List<String> run(Duration bound, Map<String, Runnable> closes) {
    long deadline = System.nanoTime() + bound.toNanos();
    Map<String, Thread> running = new LinkedHashMap<>();
    closes.forEach((name, close) -> {
      Thread t = new Thread(close, name);
      t.setDaemon(true);
      t.start();
      running.put(name, t);
    });
    List<String> late = new ArrayList<>();
    for (Map.Entry<String, Thread> e : running.entrySet()) {
      try {
        e.getValue().join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
      if (e.getValue().isAlive()) {
        late.add(e.getKey());
      }
    }
    return late;
  }
}
