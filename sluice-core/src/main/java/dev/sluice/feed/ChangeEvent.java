package dev.sluice.feed;

import java.time.Instant;
import java.util.Objects;

/**
 * One change read from a feed.
 *
 * @param <D> the document type of the backend (BSON for MongoDB)
 * @param id a stable, unique identifier of this change: the same change re-read after a crash
 *     has the same id, so consumers can de-duplicate on it
 * @param stream the stream the change was read from
 * @param position where the feed stands after this change; committing it means "processed"
 * @param operation what the change did
 * @param key canonical string form of the document key; partitioning, per-key ordering and
 *     dead-lettering use it
 * @param documentKey the key as the backend represents it
 * @param document the full document when the feed has it, else {@code null}; which state of the
 *     document it is says {@code documentState}
 * @param time the source commit time, or {@code null} when unknown
 * @param raw the backend's original event, for handlers that need more than the fields above
 * @param documentState whether {@code document} is the document as this change left it, or as it
 *     was when the change was read (possibly later)
 * @param changedFields for an update whose backend reports it: the fields this change set, keyed
 *     by dotted path, each with the value this change gave it (MongoDB's
 *     {@code updateDescription.updatedFields}); otherwise {@code null}
 * @param before the document as it was before this change (a pre-image: MongoDB's
 *     {@code fullDocumentBeforeChange}, for updates, replacements and deletes), when the feed was
 *     asked for it and the source had it; otherwise {@code null}
 */
public record ChangeEvent<D>(
    String id,
    String stream,
    Position position,
    Operation operation,
    String key,
    D documentKey,
    D document,
    Instant time,
    Object raw,
    DocumentState documentState,
    D changedFields,
    D before) {

  public ChangeEvent {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(stream, "stream");
    Objects.requireNonNull(position, "position");
    Objects.requireNonNull(operation, "operation");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(documentState, "documentState");
    if (document == null && documentState == DocumentState.AFTER_CHANGE) {
      throw new IllegalArgumentException("documentState AFTER_CHANGE needs a document");
    }
  }

  /** A change without a pre-image. */
  public ChangeEvent(String id, String stream, Position position, Operation operation, String key,
      D documentKey, D document, Instant time, Object raw, DocumentState documentState, D changedFields) {
    this(id, stream, position, operation, key, documentKey, document, time, raw, documentState, changedFields, null);
  }

  /** This change at another position (the same change, as a feed reports it from elsewhere). */
  public ChangeEvent<D> at(Position newPosition) {
    return new ChangeEvent<>(id, stream, newPosition, operation, key, documentKey, document, time, raw, documentState,
        changedFields, before);
  }

  /**
   * A change whose {@code document}, when present, is the document as this change left it (SQL
   * rows, inserts, snapshots, tests), and which reports no changed fields.
   */
  public ChangeEvent(String id, String stream, Position position, Operation operation, String key,
      D documentKey, D document, Instant time, Object raw) {
    this(id, stream, position, operation, key, documentKey, document, time, raw,
        document == null ? DocumentState.NONE : DocumentState.AFTER_CHANGE, null, null);
  }

  @Override
  public String toString() {
    return operation + " " + stream + "/" + key + " at " + position;
  }
}
