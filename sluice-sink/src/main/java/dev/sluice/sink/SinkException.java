package dev.sluice.sink;

import dev.sluice.SluiceException;
import dev.sluice.feed.Position;
import dev.sluice.listener.AcknowledgedPrefix;

/**
 * A sink could not publish: the broker is unreachable, timed out, or rejected messages. Thrown
 * from {@link dev.sluice.listener.Handler#flush}, it makes the listener redeliver from the last
 * checkpoint, so nothing is lost. A failed flush that knows which of its changes the broker did
 * acknowledge, in the order they were handed over, says so ({@link #acknowledgedThrough()}): the
 * listener commits that prefix first and sends again only what follows it (ADR 0120).
 */
public class SinkException extends SluiceException implements AcknowledgedPrefix {
  private static final long serialVersionUID = 1L;

  private final transient Position acknowledgedThrough;

  public SinkException(String message) {
    this(message, null, null);
  }

  public SinkException(String message, Throwable cause) {
    this(message, cause, null);
  }

  /**
   * @param acknowledgedThrough the last change of the longest prefix of the flush's changes whose
   *     every message the broker acknowledged, or null
   */
  public SinkException(String message, Throwable cause, Position acknowledgedThrough) {
    super(message, cause);
    this.acknowledgedThrough = acknowledgedThrough;
  }

  /** The failed flush's acknowledged prefix (see the constructor), or null when unknown or empty. */
  @Override
  public Position acknowledgedThrough() {
    return acknowledgedThrough;
  }
}
