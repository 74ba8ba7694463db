package dev.sluice.sink;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Writes envelope version 1. */
final class EnvelopeEncoder<D> implements MessageEncoder<D> {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Logger log = LoggerFactory.getLogger(EnvelopeEncoder.class);
  private static final long NEVER = Long.MIN_VALUE;
  private static final long WARN_EVERY_NANOS = TimeUnit.MINUTES.toNanos(1);

  private final DocumentMapper<D> mapper;
  private final Publication publication;
  private final Predicate<? super ChangeEvent<D>> filter;
  private final AtomicLong withoutEvent = new AtomicLong();
  private final AtomicLong lastWarning = new AtomicLong(NEVER);

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
    if (publication instanceof Publication.DomainEvents de) {
      JsonNode documentKey = toJson(event, event.documentKey(), "documentKey");
      JsonNode document = toJson(event, event.document(), "document");
      return domainEvents(event, fence, de, documentKey, document);
    }
    // Written straight from the source's documents, no tree (ADR 0073); the payload tree only
    // if a topic function asks for it.
    byte[] body = envelope(event, fence, "change", event.id(), g -> {
      g.writeFieldName("documentKey");
      write(g, event, event.documentKey(), "documentKey");
      g.writeFieldName("document");
      write(g, event, event.document(), "document");
      g.writeStringField("documentState", event.documentState().name());
      if (event.changedFields() != null) {
        g.writeFieldName("changedFields");
        write(g, event, event.changedFields(), "changedFields");
      }
      if (event.before() != null) {
        g.writeFieldName("before");
        write(g, event, event.before(), "before");
      }
    });
    return List.of(message(event, fence, "change", event.id(),
        () -> toJson(event, event.document(), "document"), body));
  }

  @Override
  public long changesWithoutEvent() {
    return withoutEvent.get();
  }

  private List<OutboundMessage<D>> domainEvents(
      ChangeEvent<D> event,
      Fence fence,
      Publication.DomainEvents de,
      JsonNode documentKey,
      JsonNode document) {
    List<JsonNode> events = ownEvents(event, de, document);
    if (events == null) {
      return List.of(); // deletes and collection events carry no domain event
    }
    if (events.isEmpty()) {
      missing(event, de);
      return List.of();
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
      byte[] body = envelope(event, fence, "event", id.asText(), g -> {
        g.writeFieldName("documentKey");
        g.writeTree(orNull(documentKey));
        g.writeFieldName("event");
        g.writeTree(domainEvent);
      });
      out.add(message(event, fence, "event", id.asText(), () -> domainEvent, body));
    }
    return out;
  }

  /**
   * The domain events this change itself produced: empty if it carries none, null for changes
   * that never carry any (deletes, collection events). Never taken from a later state: a
   * document looked up when the change was read is used only to complete an event whose id this
   * very change set.
   */
  private List<JsonNode> ownEvents(ChangeEvent<D> event, Publication.DomainEvents de, JsonNode document) {
    Operation op = event.operation();
    if (op == Operation.DELETE || op == Operation.OTHER) {
      return null;
    }
    if (op == Operation.MESSAGE) {
      return messageEvent(event, document);
    }
    if (event.documentState() == DocumentState.AFTER_CHANGE) {
      return eventsIn(event, de, at(document, de.field()));
    }
    if (op != Operation.UPDATE) {
      return List.of(); // an insert or replace without its document: nothing to publish from
    }
    if (event.changedFields() == null) {
      throw new MessageEncodingException(event, "the update's document is " + event.documentState()
          + " (not the one this change left) and the feed reports no changed fields, so this change's own"
          + " domain events cannot be told from later ones; read updates with post-images", null);
    }
    JsonNode changed = toJson(event, event.changedFields(), "changedFields");
    String field = de.field();
    List<JsonNode> whole = new ArrayList<>();
    TreeMap<Integer, JsonNode> elements = new TreeMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = changed.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String path = e.getKey();
      if (path.equals(field)) {
        whole.addAll(eventsIn(event, de, e.getValue()));
      } else if (field.startsWith(path + ".")) {
        whole.addAll(eventsIn(event, de, at(e.getValue(), field.substring(path.length() + 1))));
      } else if (path.startsWith(field + ".")) {
        String rest = path.substring(field.length() + 1);
        int dot = rest.indexOf('.');
        String first = dot < 0 ? rest : rest.substring(0, dot);
        String inside = dot < 0 ? null : rest.substring(dot + 1);
        boolean index = !first.isEmpty() && first.chars().allMatch(Character::isDigit);
        if (index && inside == null) {
          elements.put(Integer.parseInt(first), e.getValue()); // an element set (appended or replaced)
        } else if (index && inside.equals(de.idField())) {
          elements.put(Integer.parseInt(first), completed(event, de, document, field + "." + first, path, e.getValue()));
        } else if (!index && rest.equals(de.idField())) {
          whole.add(completed(event, de, document, field, path, e.getValue()));
        }
        // Other paths inside the field change an event already published: no new event.
      }
    }
    whole.addAll(elements.values());
    return whole;
  }

  /**
   * A logical-decoding message (ADR 0096) is itself the domain event: its content, a JSON object
   * (what an application writes with {@code pg_logical_emit_message(true, 'prefix', json)}).
   */
  private List<JsonNode> messageEvent(ChangeEvent<D> event, JsonNode document) {
    JsonNode content = document == null ? null : document.get("content");
    String prefix = document == null || document.get("prefix") == null ? "?" : document.get("prefix").asText();
    if (content == null || !content.isTextual()) {
      throw new MessageEncodingException(event, "the message of prefix '" + prefix + "' has no text content;"
          + " as a domain event it must hold a JSON object", null);
    }
    JsonNode parsed;
    try {
      parsed = JSON.readTree(content.asText());
    } catch (IOException e) {
      throw new MessageEncodingException(event, "the message of prefix '" + prefix + "' is not JSON ("
          + e.getMessage() + "); as a domain event it must hold a JSON object", e);
    }
    if (parsed == null || !parsed.isObject()) {
      throw new MessageEncodingException(event, "the message of prefix '" + prefix + "' holds "
          + (parsed == null ? "nothing" : parsed.getNodeType()) + "; as a domain event it must hold a JSON object",
          null);
    }
    return List.of(parsed);
  }

  /**
   * An event the update changed in place, id included (a pipeline update reports only the fields
   * that differ): complete it from the looked-up document while that still holds the same event.
   */
  private JsonNode completed(ChangeEvent<D> event, Publication.DomainEvents de, JsonNode document,
      String location, String path, JsonNode newId) {
    JsonNode current = at(document, location);
    if (current.isObject() && newId.equals(current.get(de.idField()))) {
      return current;
    }
    throw new MessageEncodingException(event, "the update set '" + path + "' (domain event " + newId
        + ") without setting the whole event at '" + location + "', and the document read since "
        + (document == null ? "was deleted" : "holds " + (current.isMissingNode() ? "no event there" : "another event"))
        + ", so the event's other fields are not known. Set the whole field in the update, or enable"
        + " post-images on the collection and read with fullDocument whenAvailable", null);
  }

  private List<JsonNode> eventsIn(ChangeEvent<D> event, Publication.DomainEvents de, JsonNode holder) {
    List<JsonNode> events = new ArrayList<>();
    if (holder == null || holder.isMissingNode() || holder.isNull()) {
      return events;
    }
    if (holder.isArray()) {
      holder.forEach(events::add);
    } else if (holder.isObject()) {
      events.add(holder);
    } else {
      throw new MessageEncodingException(
          event, "field '" + de.field() + "' must hold an object or an array of objects, but holds " + holder.getNodeType(), null);
    }
    return events;
  }

  private static JsonNode at(JsonNode node, String dottedPath) {
    JsonNode holder = node == null ? MissingNode.getInstance() : node;
    for (String part : dottedPath.split("\\.")) {
      holder = holder.isArray() && !part.isEmpty() && part.chars().allMatch(Character::isDigit)
          ? holder.path(Integer.parseInt(part)) : holder.path(part);
    }
    return holder;
  }

  private void missing(ChangeEvent<D> event, Publication.DomainEvents de) {
    String what = event.operation() == Operation.UPDATE
        ? "the update did not set the domain event field '" + de.field() + "'"
        : "the document has no domain event in field '" + de.field() + "'";
    if (de.onMissing() == Publication.MissingEvent.PARK) {
      throw new MessageEncodingException(event, what + " (domain events onMissing PARK)", null);
    }
    long count = withoutEvent.incrementAndGet();
    long now = System.nanoTime();
    long last = lastWarning.get();
    if ((last == NEVER || now - last >= WARN_EVERY_NANOS) && lastWarning.compareAndSet(last, now)) {
      log.warn("{}: {}; nothing published for it ({} change(s) without an event so far; onMissing PARK"
          + " parks them instead)", event, what, count);
    }
  }

  @FunctionalInterface
  private interface Fields {
    void write(JsonGenerator g) throws IOException;
  }

  /** The envelope: the common fields, then {@code rest}, as UTF-8 JSON. */
  private byte[] envelope(ChangeEvent<D> event, Fence fence, String kind, String id, Fields rest) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(512);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("envelope", Envelope.VERSION_TAG);
      g.writeStringField("kind", kind);
      g.writeStringField("id", id);
      g.writeStringField("changeId", event.id());
      g.writeStringField("stream", event.stream());
      g.writeStringField("key", event.key());
      g.writeStringField("operation", event.operation().name());
      g.writeStringField("position", event.position().token());
      Instant time = sourceTime(event);
      if (time == null) {
        g.writeNullField("sourceTime");
      } else {
        g.writeStringField("sourceTime", time.toString());
      }
      g.writeObjectFieldStart("fence");
      g.writeStringField("lease", fence.lease());
      g.writeNumberField("epoch", fence.epoch());
      g.writeEndObject();
      rest.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      throw new MessageEncodingException(event, "cannot write the envelope", e);
    }
    return out.toByteArray();
  }

  /** {@code value} (or null) through the mapper, as one JSON value. */
  private void write(JsonGenerator g, ChangeEvent<D> event, D value, String what) throws IOException {
    if (value == null) {
      g.writeNull();
      return;
    }
    try {
      mapper.writeJson(value, g);
    } catch (Exception e) {
      throw new MessageEncodingException(event, "cannot convert the " + what + " to JSON", e);
    } catch (StackOverflowError e) {
      throw new MessageEncodingException(event, "the " + what + " is nested too deeply", null);
    }
  }

  private OutboundMessage<D> message(
      ChangeEvent<D> event, Fence fence, String kind, String id, Supplier<JsonNode> payload, byte[] body) {
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
