package dev.sluice.sink;

import dev.sluice.ConfigurationException;

/**
 * What a sink publishes for each change.
 *
 * <ul>
 *   <li>{@link #changes()}: one message per change, with the full document after the change
 *       ({@code kind = "change"}); the message id is the change id.
 *   <li>{@link #domainEvents(String, String)}: the "current state + last event" style: a field
 *       of the document holds the domain event (an object) or events (an array of objects) that
 *       the write produced; one message per domain event ({@code kind = "event"}), whose id is
 *       the event's own id field. Because that id is stored in the document, a redelivered change
 *       yields the same message id and consumers can de-duplicate. Changes without the field, or
 *       without a document (deletes), publish nothing.
 * </ul>
 */
public sealed interface Publication {

  /** Every change as a change message. */
  record Changes() implements Publication {}

  /**
   * Domain events embedded in the document.
   *
   * @param field dotted path of the field holding an event object or an array of them
   * @param idField the field inside each event holding its stable, unique id
   */
  record DomainEvents(String field, String idField) implements Publication {
    public DomainEvents {
      ConfigurationException.requireNonNull(field, "domain event field");
      ConfigurationException.requireNonNull(idField, "domain event idField");
      ConfigurationException.require(!field.isBlank(), "domain event field", "'" + field + "'", "must not be blank");
      ConfigurationException.require(
          !idField.isBlank(), "domain event idField", "'" + idField + "'", "must not be blank");
    }
  }

  static Publication changes() {
    return new Changes();
  }

  static Publication domainEvents(String field, String idField) {
    return new DomainEvents(field, idField);
  }
}
