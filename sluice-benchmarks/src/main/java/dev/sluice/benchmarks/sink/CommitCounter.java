package dev.sluice.benchmarks.sink;

import dev.sluice.feed.Position;
import dev.sluice.listener.ListenerObserver;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The relay benchmarks' finish line: a listener observer that counts the changes its checkpoints
 * cover (a relay commits only what the broker acknowledged), until all {@code changes} are.
 */
final class CommitCounter implements ListenerObserver {
  private final long changes;
  private final AtomicLong committed = new AtomicLong();
  private final CountDownLatch done = new CountDownLatch(1);

  CommitCounter(long changes) {
    this.changes = changes;
  }

  @Override
  public void committed(String lease, long epoch, Position position, int n) {
    if (committed.addAndGet(n) >= changes) {
      done.countDown();
    }
  }

  /** Waits up to 10 minutes for every change to be committed; fails naming how many were. */
  void awaitAll() throws InterruptedException {
    if (!done.await(10, TimeUnit.MINUTES)) {
      throw new IllegalStateException("relay did not finish: " + committed.get() + " of " + changes);
    }
  }
}
