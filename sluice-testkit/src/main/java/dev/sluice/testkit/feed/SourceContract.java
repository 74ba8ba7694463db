package dev.sluice.testkit.feed;

import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;

/**
 * What the feed suites share ({@link ChangeFeedContract}, {@link ListenerContract}): a fresh stream
 * of the feed under test per use, and everything a test opens closed after it, newest first.
 *
 * @param <D> the feed's document type
 */
public abstract class SourceContract<D> {
  private final List<AutoCloseable> toClose = new ArrayList<>();

  /** A fresh stream of the feed under test, with a lease store on the same server. */
  protected abstract Source<D> newSource();

  /** Closes {@code resource} after the test; returns it. */
  <T extends AutoCloseable> T closeAfter(T resource) {
    toClose.add(resource);
    return resource;
  }

  /** A fresh stream, closed after the test. */
  Source<D> source() {
    return closeAfter(newSource());
  }

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
  }
}
