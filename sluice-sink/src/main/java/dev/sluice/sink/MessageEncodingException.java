package dev.sluice.sink;

import dev.sluice.feed.ChangeEvent;

/**
 * A change could not be turned into a message (undecodable document, domain event without an
 * id, message larger than the broker accepts). Thrown from {@link
 * dev.sluice.listener.Handler#handle}, so the listener's failure policy retries and then parks
 * the change; the message names the change and its position.
 */
public class MessageEncodingException extends SinkException {
  private static final long serialVersionUID = 1L;

  private final String eventId;

  public MessageEncodingException(ChangeEvent<?> event, String problem, Throwable cause) {
    super(
        "Cannot publish change " + event.id() + " (" + event + "): " + problem
            + (cause == null ? "" : ": " + cause),
        cause);
    this.eventId = event.id();
  }

  /** The {@link ChangeEvent#id()} of the change. */
  public String eventId() {
    return eventId;
  }
}
