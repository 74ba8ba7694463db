package dev.sluice.sink;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sluice.feed.ChangeEvent;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * One message a sink is about to publish: the envelope as bytes, its headers, and what it was
 * made from. The {@link #payload()} tree is built only if someone asks for it (a topic function
 * that routes by a field): the envelope is written straight from the source document (ADR 0073).
 *
 * @param <D> the backend's document type
 */
public final class OutboundMessage<D> {
  private final String id;
  private final String key;
  private final String kind;
  private final Map<String, String> headers;
  private final byte[] body;
  private final ChangeEvent<D> source;
  private Supplier<JsonNode> payloadSupplier;
  private JsonNode payload;

  /**
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
  public OutboundMessage(String id, String key, String kind, JsonNode payload,
      Map<String, String> headers, byte[] body, ChangeEvent<D> source) {
    this(id, key, kind, () -> payload, headers, body, source);
  }

  /** As the other constructor, with the payload built by {@code payload} when first asked for. */
  public OutboundMessage(String id, String key, String kind, Supplier<JsonNode> payload,
      Map<String, String> headers, byte[] body, ChangeEvent<D> source) {
    this.id = Objects.requireNonNull(id, "id");
    this.key = Objects.requireNonNull(key, "key");
    this.kind = Objects.requireNonNull(kind, "kind");
    this.payloadSupplier = Objects.requireNonNull(payload, "payload");
    this.headers = Map.copyOf(headers);
    this.body = Objects.requireNonNull(body, "body");
    this.source = Objects.requireNonNull(source, "source");
  }

  /** The message id: the change id, or the domain event's id. */
  public String id() {
    return id;
  }

  /** The partitioning key: the change's document key. */
  public String key() {
    return key;
  }

  /** {@code "change"} or {@code "event"}. */
  public String kind() {
    return kind;
  }

  /**
   * The document (change) or the domain event (event) as a JSON tree, or {@code null} for a change
   * without document (delete). Built on the first call.
   *
   * @throws MessageEncodingException if the document cannot be converted
   */
  public synchronized JsonNode payload() {
    if (payloadSupplier != null) {
      payload = payloadSupplier.get();
      payloadSupplier = null;
    }
    return payload;
  }

  /** Broker headers, see {@link Envelope} for the names. */
  public Map<String, String> headers() {
    return headers;
  }

  /** The envelope, serialized as UTF-8 JSON. */
  public byte[] body() {
    return body;
  }

  /** The change this message was made from. */
  public ChangeEvent<D> source() {
    return source;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof OutboundMessage<?> m && id.equals(m.id) && key.equals(m.key)
        && kind.equals(m.kind) && headers.equals(m.headers) && Arrays.equals(body, m.body)
        && source.equals(m.source);
  }

  @Override
  public int hashCode() {
    return Objects.hash(id, key, kind, headers, Arrays.hashCode(body), source);
  }

  @Override
  public String toString() {
    return "OutboundMessage[id=" + id + ", key=" + key + ", kind=" + kind + ", " + body.length
        + " bytes, source=" + source + "]";
  }
}
