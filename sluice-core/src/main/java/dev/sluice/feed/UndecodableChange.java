package dev.sluice.feed;

import java.util.Objects;

/**
 * Placed in {@link ChangeEvent#raw()} by a feed that read a change it cannot decode but can still
 * move past (it has a position). The engine never hands such a change to the handler: it goes
 * straight to the failure policy, so it is parked (with every later change of its key) or blocks the
 * partition, with {@link #reason()} as the error. It is never dropped silently.
 *
 * @param reason why it cannot be decoded, naming the field or value
 * @param source the source's raw event, kept for the dead-letter store and for inspection
 */
public record UndecodableChange(String reason, Object source) {
  public UndecodableChange {
    Objects.requireNonNull(reason, "reason");
  }
}
