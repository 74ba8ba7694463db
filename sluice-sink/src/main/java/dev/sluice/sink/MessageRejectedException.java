package dev.sluice.sink;

import dev.sluice.feed.ChangeEvent;

/**
 * The broker refused one message for good (too large, invalid destination, unroutable). The
 * sink remembers the refusal: when the listener redelivers the change, {@link
 * dev.sluice.listener.Handler#handle} throws this at once so the failure policy parks it instead
 * of retrying the whole batch forever.
 */
public class MessageRejectedException extends SinkException {
  private static final long serialVersionUID = 1L;

  private final String eventId;

  public MessageRejectedException(ChangeEvent<?> event, String reason, Throwable cause) {
    super("Broker rejected change " + event.id() + " (" + event + "): " + reason, cause);
    this.eventId = event.id();
  }

  public String eventId() {
    return eventId;
  }
}
