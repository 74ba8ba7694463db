package dev.sluice.feed;

import dev.sluice.SluiceException;

/** The feed failed for a reason that re-opening at the last checkpoint may cure. */
public class FeedException extends SluiceException {
  private static final long serialVersionUID = 1L;

  private final boolean retryable;

  public FeedException(String message, Throwable cause, boolean retryable) {
    super(message, cause);
    this.retryable = retryable;
  }

  /** Whether re-opening the cursor can help; false for errors such as "not authorized". */
  public boolean retryable() {
    return retryable;
  }
}
