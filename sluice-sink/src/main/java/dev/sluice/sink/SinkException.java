package dev.sluice.sink;

import dev.sluice.SluiceException;

/**
 * A sink could not publish: the broker is unreachable, timed out, or rejected messages. Thrown
 * from {@link dev.sluice.listener.Handler#flush}, it makes the listener redeliver from the last
 * checkpoint, so nothing is lost.
 */
public class SinkException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public SinkException(String message) {
    super(message);
  }

  public SinkException(String message, Throwable cause) {
    super(message, cause);
  }
}
