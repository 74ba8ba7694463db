package dev.sluice.lease;

import dev.sluice.SluiceException;

/**
 * A lease store request failed for a reason other than contention or a lost lease. {@link
 * #retryable()} tells the engine whether trying again can help: an unreachable server, a timeout
 * or a serialization conflict can; an authorization error, a rejected document (schema
 * validation) or a missing table cannot, and the engine stops the partition naming the cause
 * instead of retrying forever.
 */
public class LeaseStoreException extends SluiceException {
  private static final long serialVersionUID = 1L;
  private final boolean retryable;

  public LeaseStoreException(String message, boolean retryable, Throwable cause) {
    super(message, cause);
    this.retryable = retryable;
  }

  /** Whether the same request may succeed later without anyone changing configuration. */
  public boolean retryable() {
    return retryable;
  }
}
