package dev.sluice.feed;

import dev.sluice.SluiceException;

/** The error recorded for a change the feed could not decode (see {@link UndecodableChange}). */
public class UndecodableChangeException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public UndecodableChangeException(ChangeEvent<?> event, UndecodableChange change) {
    super("Undecodable change at " + event.position() + " in stream " + event.stream() + ": " + change.reason());
  }
}
