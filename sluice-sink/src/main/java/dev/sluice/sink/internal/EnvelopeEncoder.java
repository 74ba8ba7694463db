package dev.sluice.sink.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageEncodingException;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.Publication;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/** Writes envelope version 1. */
public final class EnvelopeEncoder<D> implements MessageEncoder<D> {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final DocumentMapper<D> mapper;
  private final Publication publication;
  private final Predicate<? super ChangeEvent<D>> filter;

  public EnvelopeEncoder(
      DocumentMapper<D> mapper, Publication publication, Predicate<? super ChangeEvent<D>> filter) {
    this.mapper = mapper;
    this.publication = publication;
    this.filter = filter;
  }

  @Override
  public List<OutboundMessage<D>> encode(ChangeEvent<D> event, Fence fence) {
    boolean publish;
    try {
      publish = filter.test(event);
    } catch (RuntimeException e) {
      throw new MessageEncodingException(event, "the filter threw", e);
    }
    if (!publish) {
      return List.of();
    }
    JsonNode documentKey = toJson(event, event.documentKey(), "documentKey");
    JsonNode document = toJson(event, event.document(), "document");
    if (publication instanceof Publication.DomainEvents de) {
      return domainEvents(event, fence, de, documentKey, document);
    }
    ObjectNode root = header(event, fence, "change", event.id());
    root.set("documentKey", orNull(documentKey));
    root.set("document", orNull(document));
    return List.of(message(event, fence, "change", event.id(), document, root));
  }

  private List<OutboundMessage<D>> domainEvents(
      ChangeEvent<D> event,
      Fence fence,
      Publication.DomainEvents de,
      JsonNode documentKey,
      JsonNode document) {
    if (document == null) {
      return List.of();
    }
    JsonNode holder = document;
    for (String part : de.field().split("\\.")) {
      holder = holder.path(part);
    }
    if (holder.isMissingNode() || holder.isNull()) {
      return List.of();
    }
    List<JsonNode> events = new ArrayList<>();
    if (holder.isArray()) {
      holder.forEach(events::add);
    } else if (holder.isObject()) {
      events.add(holder);
    } else {
      throw new MessageEncodingException(
          event, "field '" + de.field() + "' must hold an object or an array of objects, but holds " + holder.getNodeType(), null);
    }
    List<OutboundMessage<D>> out = new ArrayList<>(events.size());
    for (int i = 0; i < events.size(); i++) {
      JsonNode domainEvent = events.get(i);
      JsonNode id = domainEvent.get(de.idField());
      if (!domainEvent.isObject() || id == null || !id.isValueNode() || id.isNull() || id.asText().isBlank()) {
        throw new MessageEncodingException(
            event,
            "domain event #" + i + " in field '" + de.field() + "' has no id field '" + de.idField()
                + "'; without a stable id consumers cannot de-duplicate",
            null);
      }
      ObjectNode root = header(event, fence, "event", id.asText());
      root.set("documentKey", orNull(documentKey));
      root.set("event", domainEvent);
      out.add(message(event, fence, "event", id.asText(), domainEvent, root));
    }
    return out;
  }

  private ObjectNode header(ChangeEvent<D> event, Fence fence, String kind, String id) {
    ObjectNode root = JSON.createObjectNode();
    root.put("envelope", Envelope.VERSION_TAG);
    root.put("kind", kind);
    root.put("id", id);
    root.put("changeId", event.id());
    root.put("stream", event.stream());
    root.put("key", event.key());
    root.put("operation", event.operation().name());
    root.put("position", event.position().token());
    Instant time = sourceTime(event);
    if (time == null) {
      root.putNull("sourceTime");
    } else {
      root.put("sourceTime", time.toString());
    }
    ObjectNode f = root.putObject("fence");
    f.put("lease", fence.lease());
    f.put("epoch", fence.epoch());
    return root;
  }

  private OutboundMessage<D> message(
      ChangeEvent<D> event, Fence fence, String kind, String id, JsonNode payload, ObjectNode root) {
    byte[] body;
    try {
      body = JSON.writeValueAsBytes(root);
    } catch (JsonProcessingException e) {
      throw new MessageEncodingException(event, "cannot write the envelope", e);
    }
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put(Envelope.HEADER_ENVELOPE, Envelope.VERSION_TAG);
    headers.put(Envelope.HEADER_KIND, kind);
    headers.put(Envelope.HEADER_ID, id);
    headers.put(Envelope.HEADER_CHANGE_ID, event.id());
    headers.put(Envelope.HEADER_STREAM, event.stream());
    headers.put(Envelope.HEADER_OPERATION, event.operation().name());
    headers.put(Envelope.HEADER_POSITION, event.position().token());
    Instant time = sourceTime(event);
    if (time != null) {
      headers.put(Envelope.HEADER_CLUSTER_TIME, time.toString());
    }
    headers.put(Envelope.HEADER_FENCE_EPOCH, Long.toString(fence.epoch()));
    return new OutboundMessage<>(id, event.key(), kind, payload, headers, body, event);
  }

  private static Instant sourceTime(ChangeEvent<?> event) {
    return event.time() != null ? event.time() : event.position().time();
  }

  private JsonNode toJson(ChangeEvent<D> event, D value, String what) {
    if (value == null) {
      return null;
    }
    try {
      return mapper.toJson(value);
    } catch (Exception e) {
      throw new MessageEncodingException(event, "cannot convert the " + what + " to JSON", e);
    } catch (StackOverflowError e) {
      throw new MessageEncodingException(event, "the " + what + " is nested too deeply", null);
    }
  }

  private static JsonNode orNull(JsonNode n) {
    return n == null ? NullNode.getInstance() : n;
  }
}
