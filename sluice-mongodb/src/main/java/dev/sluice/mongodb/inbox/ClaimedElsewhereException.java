package dev.sluice.mongodb.inbox;

import dev.sluice.SluiceException;
import java.time.Instant;

/** Another consumer holds a live claim on the message id; leave the message unacknowledged. */
public class ClaimedElsewhereException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public ClaimedElsewhereException(String messageId, String owner, Instant until) {
    super("Message " + messageId + " is being processed by consumer " + owner + " (claim until " + until + ")");
  }
}
