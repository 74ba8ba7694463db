package dev.sluice.jdbc.inbox;

import dev.sluice.SluiceException;

/** Processing a message through the inbox failed; its transaction was rolled back. */
public class InboxException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public InboxException(String message, Throwable cause) {
    super(message, cause);
  }
}
