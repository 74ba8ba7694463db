package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;

/**
 * What happens to a change whose handler keeps failing. Both policies first retry the change in
 * place with {@link #retry()}; they differ once the attempts are used up.
 */
public sealed interface FailurePolicy {

  RetryPolicy retry();

  /**
   * Keep retrying at the maximum back-off, forever: the partition does not advance until the
   * change succeeds. Nothing is skipped; every failure is reported to the observer and the log.
   * The default when no dead-letter store is configured.
   */
  record Block(RetryPolicy retry) implements FailurePolicy {
    public Block {
      ConfigurationException.requireNonNull(retry, "retry");
    }
  }

  /**
   * Park the change in a dead-letter store with its error and attempts, park every later change
   * of the same key behind it (per-key order holds), and go on with other keys. Parked changes can
   * be listed, replayed and discarded.
   */
  record Park<D>(RetryPolicy retry, DeadLetterStore<D> store) implements FailurePolicy {
    public Park {
      ConfigurationException.requireNonNull(retry, "retry");
      ConfigurationException.requireNonNull(store, "dead-letter store");
    }
  }

  static FailurePolicy block(RetryPolicy retry) {
    return new Block(retry);
  }

  static <D> FailurePolicy park(RetryPolicy retry, DeadLetterStore<D> store) {
    return new Park<>(retry, store);
  }
}
