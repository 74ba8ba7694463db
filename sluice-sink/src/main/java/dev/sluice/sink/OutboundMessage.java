package dev.sluice.sink;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sluice.feed.ChangeEvent;
import java.util.Map;
import java.util.Objects;

/**
 * One message a sink is about to publish.
 *
 * @param id the message id: the change id, or the domain event's id; consumers de-duplicate on
 *     it (see the inbox)
 * @param key the partitioning key: the change's document key, so all messages of one document
 *     go to one Kafka partition in order
 * @param kind {@code "change"} or {@code "event"}
 * @param payload the document (change) or the domain event (event), or {@code null} for a
 *     change without document (delete)
 * @param headers broker headers, see {@link Envelope} for the names
 * @param body the envelope, serialized as UTF-8 JSON
 * @param source the change this message was made from
 */
public record OutboundMessage<D>(
    String id,
    String key,
    String kind,
    JsonNode payload,
    Map<String, String> headers,
    byte[] body,
    ChangeEvent<D> source) {
  public OutboundMessage {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(kind, "kind");
    headers = Map.copyOf(headers);
    Objects.requireNonNull(body, "body");
    Objects.requireNonNull(source, "source");
  }
}
