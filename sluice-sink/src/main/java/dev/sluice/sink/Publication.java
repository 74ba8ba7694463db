package dev.sluice.sink;

import dev.sluice.ConfigurationException;

/**
 * What a sink publishes for each change.
 *
 * <ul>
 *   <li>{@link #changes()}: one message per change, with the document the feed returned
 *       ({@code kind = "change"}); the message id is the change id. The envelope's
 *       {@code documentState} says whether that document is the one this change left
 *       ({@code AFTER_CHANGE}) or the state when the change was read ({@code CURRENT}: MongoDB's
 *       {@code updateLookup}, possibly later changes included, null once deleted); an update
 *       also carries {@code changedFields}, what the change itself set.
 *   <li>{@link #domainEvents(String, String)}: the "current state + last event" style: a field
 *       of the document holds the domain event (an object) or events (an array of objects) that
 *       the write produced; one message per domain event ({@code kind = "event"}), whose id is
 *       the event's own id field. Because that id is stored in the document, a redelivered change
 *       yields the same message id and consumers can de-duplicate. The events are always this
 *       change's own: taken from the document only when it is the one the change left, and for an
 *       update read with {@code updateLookup} from the fields the update set, never from the
 *       looked-up later state (docs/adr/0046-domain-events-from-the-change-itself.md). A change
 *       that carries no event follows {@link MissingEvent}; deletes carry none and publish nothing.
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
  record DomainEvents(String field, String idField, MissingEvent onMissing) implements Publication {
    public DomainEvents {
      ConfigurationException.requireNonNull(field, "domain event field");
      ConfigurationException.requireNonNull(idField, "domain event idField");
      ConfigurationException.requireNonNull(onMissing, "domain event onMissing");
      ConfigurationException.require(!field.isBlank(), "domain event field", "'" + field + "'", "must not be blank");
      ConfigurationException.require(
          !idField.isBlank(), "domain event idField", "'" + idField + "'", "must not be blank");
    }

    /** Changes without an event are counted and logged ({@link MissingEvent#COUNT}). */
    public DomainEvents(String field, String idField) {
      this(field, idField, MissingEvent.COUNT);
    }
  }

  /**
   * What happens to an insert, replace or update that carries no domain event (the document
   * lacks the field, or the update did not set it). Never silent.
   */
  enum MissingEvent {
    /**
     * Publish nothing for it; count it ({@link MessageEncoder#changesWithoutEvent()}) and log a
     * warning naming the change (at most once a minute per encoder, with the count since).
     */
    COUNT,
    /**
     * Fail it with a {@link MessageEncodingException} naming the field: the failure policy parks
     * it as a dead letter (and holds back the key's later changes), for writers that must always
     * produce an event.
     */
    PARK
  }

  static Publication changes() {
    return new Changes();
  }

  static Publication domainEvents(String field, String idField) {
    return new DomainEvents(field, idField);
  }

  static Publication domainEvents(String field, String idField, MissingEvent onMissing) {
    return new DomainEvents(field, idField, onMissing);
  }
}
