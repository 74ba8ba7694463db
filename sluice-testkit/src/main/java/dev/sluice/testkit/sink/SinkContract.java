package dev.sluice.testkit.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageEncodingException;
import dev.sluice.sink.Publication;
import dev.sluice.sink.SinkException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite every broker sink passes (Kafka, AMQP), against a real broker. A sink
 * is a {@link Handler}: {@code handle} sends asynchronously, {@code flush} returns only once the
 * broker acknowledged everything, and fails (without losing or reordering anything) while the
 * broker is down.
 *
 * <p>Subclasses start a broker once per class and implement the hooks below.
 */
public abstract class SinkContract {
  private static final AtomicInteger DESTINATIONS = new AtomicInteger();
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");

  private final List<AutoCloseable> toClose = new ArrayList<>();
  private final AtomicInteger positions = new AtomicInteger();

  /** A message as a consumer of the destination sees it. */
  public record Received(String key, Map<String, String> headers, byte[] body) {
    public Received {
      headers = Map.copyOf(headers);
      Objects.requireNonNull(body, "body");
    }

    public Envelope envelope() {
      return Envelope.parse(body);
    }
  }

  /** Creates whatever the destination needs (topic; exchange, queue and binding). */
  protected abstract void prepare(String destination);

  /** A sink publishing to {@code destination}; it is closed after the test. */
  protected abstract Handler<BsonDocument> newSink(
      String destination, MessageEncoder<BsonDocument> encoder, Duration flushTimeout);

  /**
   * Every message a consumer received from {@code destination} since it was prepared, in
   * arrival order, waiting up to {@code timeout} until there are at least {@code atLeast}.
   */
  protected abstract List<Received> received(String destination, int atLeast, Duration timeout);

  /** How many messages the broker holds for {@code destination} right now, without waiting. */
  protected abstract long storedAtBroker(String destination);

  /** The largest message the sinks made by {@link #newSink} accept, in bytes. */
  protected abstract int messageSizeLimit();

  /** Stops the broker; clients lose their connections. */
  protected abstract void stopBroker();

  /** Starts the broker again at the same address. */
  protected abstract void startBroker();

  @AfterEach
  void closeSinks() throws Exception {
    for (AutoCloseable c : toClose) {
      c.close();
    }
    toClose.clear();
  }

  // ---------------------------------------------------------------------------------------

  @Test
  void publishesTheVersionedEnvelopeWithHeaders() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink = sink(dest, encoder().build(), Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 7);
    ChangeEvent<BsonDocument> change = change("orders", "k1", 1, Operation.UPDATE, doc("k1", 1));

    sink.handle(change, fence);
    sink.flush(fence);

    List<Received> got = received(dest, 1, Duration.ofSeconds(20));
    assertThat(got).hasSize(1);
    Received r = got.get(0);
    assertThat(r.key()).isEqualTo("k1");
    assertThat(r.headers())
        .containsEntry(Envelope.HEADER_ID, change.id())
        .containsEntry(Envelope.HEADER_CHANGE_ID, change.id())
        .containsEntry(Envelope.HEADER_OPERATION, "UPDATE")
        .containsEntry(Envelope.HEADER_POSITION, change.position().token())
        .containsEntry(Envelope.HEADER_CLUSTER_TIME, change.time().toString())
        .containsEntry(Envelope.HEADER_FENCE_EPOCH, "7")
        .containsEntry(Envelope.HEADER_STREAM, "orders")
        .containsEntry(Envelope.HEADER_ENVELOPE, Envelope.VERSION_TAG);
    Envelope e = r.envelope();
    assertThat(e.version()).isEqualTo(1);
    assertThat(e.kind()).isEqualTo("change");
    assertThat(e.id()).isEqualTo(change.id());
    assertThat(e.key()).isEqualTo("k1");
    assertThat(e.stream()).isEqualTo("orders");
    assertThat(e.operation()).isEqualTo("UPDATE");
    assertThat(e.position()).isEqualTo(change.position().token());
    assertThat(e.sourceTime()).isEqualTo(change.time());
    assertThat(e.fenceEpoch()).isEqualTo(7);
    assertThat(e.document().get("_id").asText()).isEqualTo("k1");
    assertThat(e.document().get("version").asInt()).isEqualTo(1);
    assertThat(e.documentKey().get("_id").asText()).isEqualTo("k1");
  }

  @Test
  void keepsOrderPerKeyAndPublishesEachChangeOnceWithoutFailures() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink = sink(dest, encoder().build(), Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    int keys = 8;
    int versions = 40;
    for (int v = 1; v <= versions; v++) {
      for (int k = 0; k < keys; k++) {
        sink.handle(change("orders", "key-" + k, v, Operation.UPDATE, doc("key-" + k, v)), fence);
      }
      if (v % 10 == 0) {
        sink.flush(fence);
      }
    }
    List<Received> got = received(dest, keys * versions, Duration.ofSeconds(30));
    assertThat(got).hasSize(keys * versions);
    Map<String, List<Integer>> perKey = versionsPerKey(got);
    assertThat(perKey).hasSize(keys);
    List<Integer> expected = new ArrayList<>();
    for (int v = 1; v <= versions; v++) {
      expected.add(v);
    }
    perKey.values().forEach(list -> assertThat(list).containsExactlyElementsOf(expected));
  }

  @Test
  void everythingIsStoredAtTheBrokerWhenFlushReturns() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink = sink(dest, encoder().build(), Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    for (int i = 1; i <= 300; i++) {
      sink.handle(change("orders", "k" + (i % 5), i, Operation.INSERT, doc("k" + (i % 5), i)), fence);
    }
    sink.flush(fence);
    // No waiting: flush may only return once the broker acknowledged (stored) all 300.
    assertThat(storedAtBroker(dest)).isEqualTo(300);
  }

  @Test
  void flushFailsWhileTheBrokerIsDownAndNothingIsLostAfterTheRestart() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink = sink(dest, encoder().build(), Duration.ofSeconds(3));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    List<ChangeEvent<BsonDocument>> before = new ArrayList<>();
    List<ChangeEvent<BsonDocument>> during = new ArrayList<>();
    for (int v = 1; v <= 20; v++) {
      before.add(change("orders", "k" + (v % 3), v, Operation.UPDATE, doc("k" + (v % 3), v)));
    }
    for (int v = 21; v <= 40; v++) {
      during.add(change("orders", "k" + (v % 3), v, Operation.UPDATE, doc("k" + (v % 3), v)));
    }
    for (ChangeEvent<BsonDocument> c : before) {
      sink.handle(c, fence);
    }
    sink.flush(fence);
    assertThat(received(dest, before.size(), Duration.ofSeconds(20))).hasSize(before.size());

    stopBroker();
    try {
      // What the listener does: deliver, then flush before committing. The broker is down,
      // so flush must fail and the checkpoint must not move.
      for (ChangeEvent<BsonDocument> c : during) {
        sink.handle(c, fence);
      }
      assertThatThrownBy(() -> sink.flush(fence)).isInstanceOf(SinkException.class);
    } finally {
      startBroker();
    }

    // The listener redelivers from the last checkpoint: the same changes again, in order.
    for (ChangeEvent<BsonDocument> c : during) {
      sink.handle(c, fence);
    }
    sink.flush(fence);

    int total = before.size() + during.size();
    List<Received> got = received(dest, total, Duration.ofSeconds(30));
    Set<String> ids = new LinkedHashSet<>();
    got.forEach(r -> ids.add(r.headers().get(Envelope.HEADER_ID)));
    List<String> expectedIds = new ArrayList<>();
    before.forEach(c -> expectedIds.add(c.id()));
    during.forEach(c -> expectedIds.add(c.id()));
    assertThat(ids).containsExactlyInAnyOrderElementsOf(expectedIds);
    // Per key, first deliveries are in version order: duplicates possible, reordering never.
    versionsPerKey(dedupe(got)).values().forEach(list -> assertThat(list).isSorted());
  }

  @Test
  void publishesDomainEventsWithTheirOwnStableIds() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink =
        sink(dest, encoder().publication(Publication.domainEvents("outbox.events", "eventId")).build(),
            Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    BsonDocument withEvents = doc("k1", 2);
    withEvents.put("outbox", new BsonDocument("events", new BsonArray(List.of(
        new BsonDocument("eventId", new BsonString("evt-1")).append("type", new BsonString("OrderPlaced")),
        new BsonDocument("eventId", new BsonString("evt-2")).append("type", new BsonString("OrderPaid"))))));
    ChangeEvent<BsonDocument> first = change("orders", "k1", 2, Operation.UPDATE, withEvents);

    sink.handle(change("orders", "k1", 1, Operation.INSERT, doc("k1", 1)), fence); // no events
    sink.handle(first, fence);
    sink.handle(change("orders", "k1", 3, Operation.DELETE, null), fence); // no document
    sink.handle(first, fence); // redelivered: same ids
    sink.flush(fence);

    List<Received> got = received(dest, 4, Duration.ofSeconds(20));
    assertThat(got).extracting(r -> r.headers().get(Envelope.HEADER_ID))
        .containsExactly("evt-1", "evt-2", "evt-1", "evt-2");
    Envelope e = got.get(0).envelope();
    assertThat(e.kind()).isEqualTo("event");
    assertThat(e.changeId()).isEqualTo(first.id());
    assertThat(e.event().get("type").asText()).isEqualTo("OrderPlaced");
    assertThat(got.get(1).envelope().event().get("type").asText()).isEqualTo("OrderPaid");
  }

  @Test
  void theFilterSkipsChanges() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink =
        sink(dest,
            encoder().filter(c -> c.document() == null || !c.document().containsKey("migration")).build(),
            Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    BsonDocument migrated = doc("k1", 2);
    migrated.put("migration", BsonBoolean.TRUE);
    sink.handle(change("orders", "k1", 1, Operation.INSERT, doc("k1", 1)), fence);
    sink.handle(change("orders", "k1", 2, Operation.UPDATE, migrated), fence);
    sink.handle(change("orders", "k1", 3, Operation.UPDATE, doc("k1", 3)), fence);
    sink.flush(fence);
    assertThat(storedAtBroker(dest)).isEqualTo(2);
    assertThat(versionsPerKey(received(dest, 2, Duration.ofSeconds(20))).get("k1")).containsExactly(1, 3);
  }

  @Test
  void anUnpublishableChangeFailsInHandleNamingItAndOthersStillFlow() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink =
        sink(dest, encoder().publication(Publication.domainEvents("events", "id")).build(), Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    BsonDocument bad = doc("k1", 1);
    bad.put("events", new BsonArray(List.of(new BsonDocument("type", new BsonString("NoId")))));
    ChangeEvent<BsonDocument> poison = change("orders", "k1", 1, Operation.UPDATE, bad);
    BsonDocument good = doc("k2", 1);
    good.put("events", new BsonDocument("id", new BsonString("ok-1")));

    assertThatThrownBy(() -> sink.handle(poison, fence))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining(poison.id())
        .hasMessageContaining(poison.position().token())
        .hasMessageContaining("'id'");
    sink.handle(change("orders", "k2", 1, Operation.UPDATE, good), fence);
    sink.flush(fence);
    assertThat(received(dest, 1, Duration.ofSeconds(20)))
        .extracting(r -> r.headers().get(Envelope.HEADER_ID)).containsExactly("ok-1");
  }

  @Test
  void anOversizedMessageFailsInHandleNamingTheChange() throws Exception {
    String dest = destination();
    Handler<BsonDocument> sink = sink(dest, encoder().build(), Duration.ofSeconds(20));
    Fence fence = new Fence("orders#0", "owner-1", 1);
    BsonDocument huge = doc("big", 1);
    huge.put("blob", new BsonString("x".repeat(messageSizeLimit() + 1024)));
    ChangeEvent<BsonDocument> c = change("orders", "big", 1, Operation.INSERT, huge);
    assertThatThrownBy(() -> sink.handle(c, fence))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining(c.id())
        .hasMessageContaining("bytes");
    sink.flush(fence);
    assertThat(storedAtBroker(dest)).isZero();
  }

  // ---------------------------------------------------------------------------------------

  private String destination() {
    String d = "sink-contract-" + DESTINATIONS.incrementAndGet();
    prepare(d);
    return d;
  }

  private Handler<BsonDocument> sink(String dest, MessageEncoder<BsonDocument> encoder, Duration flushTimeout) {
    Handler<BsonDocument> h = newSink(dest, encoder, flushTimeout);
    if (h instanceof AutoCloseable c) {
      toClose.add(c);
    }
    return h;
  }

  protected static MessageEncoder.Builder<BsonDocument> encoder() {
    return MessageEncoder.builder(DocumentMapper.<BsonDocument>bson());
  }

  /** A change as a MongoDB feed would deliver it; {@code version} is stored in the document. */
  protected ChangeEvent<BsonDocument> change(
      String stream, String key, int version, Operation op, BsonDocument document) {
    int n = positions.incrementAndGet();
    Instant time = T0.plusSeconds(n);
    return new ChangeEvent<>(
        stream + ":" + key + ":" + version + ":" + op,
        stream,
        new Position("token-" + n, time),
        op,
        key,
        new BsonDocument("_id", new BsonString(key)),
        document,
        time,
        null);
  }

  protected static BsonDocument doc(String key, int version) {
    return new BsonDocument("_id", new BsonString(key)).append("version", new BsonInt32(version));
  }

  private static List<Received> dedupe(List<Received> got) {
    Map<String, Received> first = new LinkedHashMap<>();
    got.forEach(r -> first.putIfAbsent(r.headers().get(Envelope.HEADER_ID), r));
    return new ArrayList<>(first.values());
  }

  private static Map<String, List<Integer>> versionsPerKey(List<Received> got) {
    Map<String, List<Integer>> perKey = new HashMap<>();
    for (Received r : got) {
      String body = new String(r.body(), StandardCharsets.UTF_8);
      Envelope e = Envelope.parse(body.getBytes(StandardCharsets.UTF_8));
      perKey.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(e.document().get("version").asInt());
    }
    return perKey;
  }
}
