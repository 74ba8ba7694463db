package dev.sluice.mongodb.inbox;

import dev.sluice.SluiceException;

/** The consumer's work failed; the message id was not recorded, so a redelivery retries it. */
public class InboxWorkException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public InboxWorkException(String messageId, Throwable cause) {
    super("Processing message " + messageId + " failed: " + cause, cause);
  }
}
