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
 * @param document the full document after the change when the feed has it, else {@code null}
 * @param time the source commit time, or {@code null} when unknown
 * @param raw the backend's original event, for handlers that need more than the fields above
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
    Object raw) {

  public ChangeEvent {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(stream, "stream");
    Objects.requireNonNull(position, "position");
    Objects.requireNonNull(operation, "operation");
    Objects.requireNonNull(key, "key");
  }

  @Override
  public String toString() {
    return operation + " " + stream + "/" + key + " at " + position;
  }
}
