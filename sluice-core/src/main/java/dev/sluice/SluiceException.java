package dev.sluice;

/**
 * Root of every exception Sluice throws. All are unchecked: callers that want to react to a
 * specific failure catch the subtype (for example {@link dev.sluice.lease.LeaseLostException}).
 */
public class SluiceException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public SluiceException(String message) {
    super(message);
  }

  public SluiceException(String message, Throwable cause) {
    super(message, cause);
  }
}
