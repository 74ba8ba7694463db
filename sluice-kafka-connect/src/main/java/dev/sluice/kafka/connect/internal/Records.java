package dev.sluice.kafka.connect.internal;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.OutboundMessage;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Turns changes into Connect records. The key is the canonical document key (the key Sluice's Kafka
 * relay uses, so both put a document's changes in the same Kafka partition). The value is either
 * a {@link #CHANGE_SCHEMA} struct with the fields of Sluice's envelope, or the envelope itself as
 * a string (byte for byte the relay's). Both carry the relay's {@code sluice-*} headers.
 */
public final class Records<D> {
  static final Schema TIME = Timestamp.builder().optional().build();

  static final Schema FENCE_SCHEMA = SchemaBuilder.struct().name("dev.sluice.kafka.connect.Fence").version(1)
      .field("lease", Schema.STRING_SCHEMA)
      .field("epoch", Schema.INT64_SCHEMA)
      .build();

  /** The value schema of a change (value.format=struct). Documents are relaxed extended JSON strings. */
  public static final Schema CHANGE_SCHEMA = SchemaBuilder.struct().name("dev.sluice.kafka.connect.Change").version(1)
      .doc("A change in Sluice's envelope (sluice/1); documents as JSON text: MongoDB relaxed extended JSON,"
          + " or a PostgreSQL row's columns as the envelope writes them.")
      .field("envelope", Schema.STRING_SCHEMA)
      .field("kind", Schema.STRING_SCHEMA)
      .field("id", Schema.STRING_SCHEMA)
      .field("changeId", Schema.STRING_SCHEMA)
      .field("stream", Schema.STRING_SCHEMA)
      .field("partition", Schema.INT32_SCHEMA)
      .field("partitions", Schema.INT32_SCHEMA)
      .field("key", Schema.STRING_SCHEMA)
      .field("operation", Schema.STRING_SCHEMA)
      .field("position", Schema.STRING_SCHEMA)
      .field("sourceTime", TIME)
      .field("fence", FENCE_SCHEMA)
      .field("documentKey", Schema.OPTIONAL_STRING_SCHEMA)
      .field("document", Schema.OPTIONAL_STRING_SCHEMA)
      .field("documentState", Schema.STRING_SCHEMA)
      .field("changedFields", Schema.OPTIONAL_STRING_SCHEMA)
      .field("before", Schema.OPTIONAL_STRING_SCHEMA)
      .build();

  /** The value schema of a heartbeat record. */
  public static final Schema HEARTBEAT_SCHEMA = SchemaBuilder.struct().name("dev.sluice.kafka.connect.Heartbeat")
      .version(1)
      .field("stream", Schema.STRING_SCHEMA)
      .field("partition", Schema.INT32_SCHEMA)
      .field("partitions", Schema.INT32_SCHEMA)
      .field("position", Schema.STRING_SCHEMA)
      .field("sourceTime", TIME)
      .field("emittedAt", Timestamp.SCHEMA)
      .build();

  /** The value schema of a parked change. */
  public static final Schema PARKED_SCHEMA = SchemaBuilder.struct().name("dev.sluice.kafka.connect.Parked")
      .version(1)
      .field("changeId", Schema.STRING_SCHEMA)
      .field("stream", Schema.STRING_SCHEMA)
      .field("partition", Schema.INT32_SCHEMA)
      .field("key", Schema.STRING_SCHEMA)
      .field("operation", Schema.STRING_SCHEMA)
      .field("position", Schema.STRING_SCHEMA)
      .field("reason", Schema.STRING_SCHEMA)
      .field("raw", Schema.OPTIONAL_STRING_SCHEMA)
      .build();

  private final boolean envelope;
  private final MessageEncoder<D> encoder;
  private final Function<D, String> json;

  /**
   * Records whose documents are written by {@code mapper} in envelopes, and by {@code json} in
   * the fields of the value struct.
   */
  public Records(boolean envelopeValues, DocumentMapper<D> mapper, Function<D, String> json) {
    this.envelope = envelopeValues;
    this.encoder = MessageEncoder.builder(mapper).build();
    this.json = json;
  }

  /** The record of {@code event}, read from partition {@code unit}, with {@code offset}. */
  public SourceRecord change(ChangeEvent<D> event, Unit unit, Fence fence, String topic,
      Map<String, Object> partition, Map<String, Object> offset) {
    ConnectHeaders headers = new ConnectHeaders();
    Instant time = event.time() != null ? event.time() : event.position().time();
    if (envelope) {
      List<OutboundMessage<D>> messages = encoder.encode(event, fence);
      OutboundMessage<D> m = messages.get(0); // change mode, no filter: exactly one
      m.headers().forEach(headers::addString);
      return new SourceRecord(partition, offset, topic, null, Schema.STRING_SCHEMA, m.key(), Schema.STRING_SCHEMA,
          new String(m.body(), StandardCharsets.UTF_8), time == null ? null : time.toEpochMilli(), headers);
    }
    Struct value = new Struct(CHANGE_SCHEMA)
        .put("envelope", Envelope.VERSION_TAG)
        .put("kind", "change")
        .put("id", event.id())
        .put("changeId", event.id())
        .put("stream", event.stream())
        .put("partition", unit.index())
        .put("partitions", unit.count())
        .put("key", event.key())
        .put("operation", event.operation().name())
        .put("position", event.position().token())
        .put("sourceTime", time == null ? null : Date.from(time))
        .put("fence", new Struct(FENCE_SCHEMA).put("lease", fence.lease()).put("epoch", fence.epoch()))
        .put("documentKey", json(event.documentKey()))
        .put("document", json(event.document()))
        .put("documentState", event.documentState().name())
        .put("changedFields", json(event.changedFields()))
        .put("before", json(event.before()));
    headers.addString(Envelope.HEADER_ENVELOPE, Envelope.VERSION_TAG);
    headers.addString(Envelope.HEADER_KIND, "change");
    headers.addString(Envelope.HEADER_ID, event.id());
    headers.addString(Envelope.HEADER_CHANGE_ID, event.id());
    headers.addString(Envelope.HEADER_STREAM, event.stream());
    headers.addString(Envelope.HEADER_OPERATION, event.operation().name());
    headers.addString(Envelope.HEADER_POSITION, event.position().token());
    if (time != null) {
      headers.addString(Envelope.HEADER_CLUSTER_TIME, time.toString());
    }
    headers.addString(Envelope.HEADER_FENCE_EPOCH, Long.toString(fence.epoch()));
    return new SourceRecord(partition, offset, topic, null, Schema.STRING_SCHEMA, event.key(), CHANGE_SCHEMA, value,
        time == null ? null : time.toEpochMilli(), headers);
  }

  /** A heartbeat: moves the partition's offset to {@code position} without a change record. */
  public SourceRecord heartbeat(String stream, Unit unit, Position position, String topic,
      Map<String, Object> partition, Map<String, Object> offset) {
    Instant now = Instant.now();
    Struct value = new Struct(HEARTBEAT_SCHEMA)
        .put("stream", stream)
        .put("partition", unit.index())
        .put("partitions", unit.count())
        .put("position", position.token())
        .put("sourceTime", position.time() == null ? null : Date.from(position.time()))
        .put("emittedAt", Date.from(now));
    return new SourceRecord(partition, offset, topic, null, Schema.STRING_SCHEMA,
        stream + "#" + unit.index() + "of" + unit.count(), HEARTBEAT_SCHEMA, value, now.toEpochMilli());
  }

  /** A parked change: it, and every later change of its key, goes to the parked topic. */
  public SourceRecord parked(ChangeEvent<D> event, Unit unit, String reason, String raw, String topic,
      Map<String, Object> partition, Map<String, Object> offset) {
    Struct value = new Struct(PARKED_SCHEMA)
        .put("changeId", event.id())
        .put("stream", event.stream())
        .put("partition", unit.index())
        .put("key", event.key())
        .put("operation", event.operation().name())
        .put("position", event.position().token())
        .put("reason", reason)
        .put("raw", raw);
    return new SourceRecord(partition, offset, topic, null, Schema.STRING_SCHEMA, event.key(), PARKED_SCHEMA, value);
  }

  /** {@code document} as JSON, or null. */
  private String json(D document) {
    return document == null ? null : json.apply(document);
  }
}
