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
   *
   * <p>{@code maxCachedKeys} bounds how many parked keys of a partition are held in memory; keys
   * beyond it are asked of the store, one query per change of such a key.
   */
  record Park<D>(RetryPolicy retry, DeadLetterStore<D> store, int maxCachedKeys)
      implements FailurePolicy {
    public static final int DEFAULT_MAX_CACHED_KEYS = 10_000;

    public Park {
      ConfigurationException.requireNonNull(retry, "retry");
      ConfigurationException.requireNonNull(store, "dead-letter store");
      ConfigurationException.require(maxCachedKeys >= 1, "maxCachedKeys", maxCachedKeys,
          "must be at least 1");
    }

    public Park(RetryPolicy retry, DeadLetterStore<D> store) {
      this(retry, store, DEFAULT_MAX_CACHED_KEYS);
    }
  }

  static FailurePolicy block(RetryPolicy retry) {
    return new Block(retry);
  }

  static <D> FailurePolicy park(RetryPolicy retry, DeadLetterStore<D> store) {
    return new Park<>(retry, store);
  }

  /** Like {@link #park(RetryPolicy, DeadLetterStore)}, holding at most {@code maxCachedKeys} keys. */
  static <D> FailurePolicy park(RetryPolicy retry, DeadLetterStore<D> store, int maxCachedKeys) {
    return new Park<>(retry, store, maxCachedKeys);
  }
}
