package dev.sluice.benchmarks.jmh;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.bson.BsonArray;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonDouble;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;
import org.bson.types.ObjectId;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The envelope of one MongoDB change, written three ways in the same JVM:
 *
 * <ul>
 *   <li>{@code bsonToJsonText}: only the driver's relaxed extended JSON of the document (the floor:
 *       what any JSON envelope of it costs at least);
 *   <li>{@code treeEnvelope}: the encoder as it was before ADR 0073 (document to JSON text, parsed
 *       into a Jackson tree, set into an envelope tree, the tree serialized), rebuilt here as the
 *       baseline;
 *   <li>{@code streamedEnvelope}: {@link MessageEncoder} as it is (the envelope streamed, the
 *       driver's JSON text written into it as is, the payload tree only on demand).
 * </ul>
 *
 * <p>Run: see {@code docs/benchmarks.md} ("Envelope encoding").
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class EnvelopeEncodingBenchmark {
  private static final JsonWriterSettings RELAXED =
      JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Fields of the document: 10 is a small order, 100 a large one. */
  @Param({"10", "100"})
  public int fields;

  private ChangeEvent<BsonDocument> event;
  private final Fence fence = new Fence("shop.orders#0of1", "bench", 1_767_225_600_000_000L);
  private final MessageEncoder<BsonDocument> encoder =
      MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build();
  private final DocumentMapper<BsonDocument> mapper = DocumentMapper.bson();

  @Setup
  public void setUp() {
    ObjectId id = new ObjectId();
    BsonDocument doc = new BsonDocument("_id", new BsonObjectId(id));
    for (int i = 0; i < fields; i++) {
      switch (i % 5) {
        case 0 -> doc.append("s" + i, new BsonString("value number " + i));
        case 1 -> doc.append("n" + i, new BsonInt32(i));
        case 2 -> doc.append("l" + i, new BsonInt64(1L << 40 | i));
        case 3 -> doc.append("d" + i, new BsonDouble(i * 1.5));
        default -> doc.append("a" + i, new BsonArray(java.util.List.of(
            new BsonDocument("sku", new BsonString("A-" + i)).append("qty", new BsonInt32(i)),
            new BsonDateTime(1_767_225_600_000L + i))));
      }
    }
    BsonDocument key = new BsonDocument("_id", new BsonObjectId(id));
    event = new ChangeEvent<>("ch-" + id, "shop.orders", Position.of("8264A1B2C3000000012B022C0100296E5A1004"),
        Operation.INSERT, id.toHexString(), key, doc, Instant.parse("2026-11-26T12:00:00Z"), null,
        DocumentState.AFTER_CHANGE, null);
  }

  @Benchmark
  public String bsonToJsonText() {
    return event.document().toJson(RELAXED);
  }

  @Benchmark
  public byte[] treeEnvelope() throws Exception {
    ObjectNode root = JSON.createObjectNode();
    root.put("envelope", "sluice/1");
    root.put("kind", "change");
    root.put("id", event.id());
    root.put("changeId", event.id());
    root.put("stream", event.stream());
    root.put("key", event.key());
    root.put("operation", event.operation().name());
    root.put("position", event.position().token());
    root.put("sourceTime", event.time().toString());
    ObjectNode f = root.putObject("fence");
    f.put("lease", fence.lease());
    f.put("epoch", fence.epoch());
    root.set("documentKey", mapper.toJson(event.documentKey()));
    root.set("document", mapper.toJson(event.document()));
    root.put("documentState", event.documentState().name());
    return JSON.writeValueAsBytes(root);
  }

  @Benchmark
  public byte[] streamedEnvelope() {
    return encoder.encode(event, fence).get(0).body();
  }
}
