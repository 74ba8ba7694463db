package dev.sluice.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.bson.BsonArray;
import org.bson.BsonDateTime;
import org.bson.BsonDecimal128;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.types.Decimal128;
import org.bson.types.ObjectId;
import org.junit.jupiter.api.Test;

class MessageEncoderTest {
  private static final Fence FENCE = new Fence("shop.orders#2", "node-1", 42);
  private static final Instant T = Instant.parse("2026-03-01T10:15:30.123Z");

  private static ChangeEvent<BsonDocument> change(Operation op, BsonDocument doc) {
    return new ChangeEvent<>("chg-1", "shop.orders", new Position("tok-9", T), op, "k1",
        new BsonDocument("_id", new BsonString("k1")), doc, T, null);
  }

  private static MessageEncoder.Builder<BsonDocument> bson() {
    return MessageEncoder.builder(DocumentMapper.<BsonDocument>bson());
  }

  @Test
  void writesEnvelopeVersion1WithTypedBsonValuesAsRelaxedExtendedJson() throws Exception {
    ObjectId oid = new ObjectId("65f0c0ffee0000000000abcd");
    BsonDocument doc = new BsonDocument("_id", new BsonString("k1"))
        .append("owner", new BsonObjectId(oid))
        .append("total", new BsonDecimal128(new Decimal128(new BigDecimal("12.50"))))
        .append("at", new BsonDateTime(T.toEpochMilli()))
        .append("count", new BsonInt64(3));
    OutboundMessage<BsonDocument> m = bson().build().encode(change(Operation.UPDATE, doc), FENCE).get(0);

    var json = new ObjectMapper().readTree(m.body());
    assertThat(json.get("envelope").asText()).isEqualTo("sluice/1");
    assertThat(json.get("kind").asText()).isEqualTo("change");
    assertThat(json.get("id").asText()).isEqualTo("chg-1");
    assertThat(json.get("fence").get("lease").asText()).isEqualTo("shop.orders#2");
    assertThat(json.get("fence").get("epoch").asLong()).isEqualTo(42);
    assertThat(json.get("sourceTime").asText()).isEqualTo("2026-03-01T10:15:30.123Z");
    assertThat(json.get("document").get("owner").get("$oid").asText()).isEqualTo(oid.toHexString());
    assertThat(json.get("document").get("total").get("$numberDecimal").asText()).isEqualTo("12.50");
    assertThat(json.get("document").get("count").asLong()).isEqualTo(3);
    assertThat(json.get("document").get("at").get("$date").asText()).isEqualTo("2026-03-01T10:15:30.123Z");
    assertThat(m.key()).isEqualTo("k1");
    assertThat(m.headers()).containsEntry(Envelope.HEADER_FENCE_EPOCH, "42")
        .containsEntry(Envelope.HEADER_CLUSTER_TIME, T.toString());
  }

  @Test
  void aDeleteHasNoDocumentAndNoClusterTimeHeaderWhenTheTimeIsUnknown() {
    ChangeEvent<BsonDocument> delete = new ChangeEvent<>("chg-2", "shop.orders", Position.of("tok"),
        Operation.DELETE, "k1", new BsonDocument("_id", new BsonString("k1")), null, null, null);
    OutboundMessage<BsonDocument> m = bson().build().encode(delete, FENCE).get(0);
    Envelope e = Envelope.parse(m.body());
    assertThat(e.document()).isNull();
    assertThat(e.sourceTime()).isNull();
    assertThat(e.operation()).isEqualTo("DELETE");
    assertThat(m.headers()).doesNotContainKey(Envelope.HEADER_CLUSTER_TIME);
  }

  @Test
  void domainEventsComeFromANestedFieldAsObjectOrArray() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("state.lastEvent", "eventId")).build();
    BsonDocument single = new BsonDocument("state",
        new BsonDocument("lastEvent", new BsonDocument("eventId", new BsonString("e-7")).append("type", new BsonString("Paid"))));
    assertThat(enc.encode(change(Operation.UPDATE, single), FENCE))
        .singleElement()
        .satisfies(m -> {
          assertThat(m.id()).isEqualTo("e-7");
          assertThat(m.kind()).isEqualTo("event");
          assertThat(Envelope.parse(m.body()).event().get("type").asText()).isEqualTo("Paid");
          assertThat(Envelope.parse(m.body()).changeId()).isEqualTo("chg-1");
        });
    BsonDocument many = new BsonDocument("state", new BsonDocument("lastEvent", new BsonArray(List.of(
        new BsonDocument("eventId", new BsonString("e-8")), new BsonDocument("eventId", new BsonString("e-9"))))));
    assertThat(enc.encode(change(Operation.UPDATE, many), FENCE)).extracting(OutboundMessage::id).containsExactly("e-8", "e-9");
    assertThat(enc.encode(change(Operation.UPDATE, new BsonDocument("state", new BsonDocument())), FENCE)).isEmpty();
  }

  @Test
  void badDomainEventsAndThrowingFiltersNameTheChangeAndPosition() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("lastEvent", "id")).build();
    assertThatThrownBy(() -> enc.encode(change(Operation.UPDATE, new BsonDocument("lastEvent", new BsonString("oops"))), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("chg-1")
        .hasMessageContaining("tok-9")
        .hasMessageContaining("object or an array");
    MessageEncoder<BsonDocument> filtering = bson().filter(c -> { throw new IllegalStateException("bad filter"); }).build();
    assertThatThrownBy(() -> filtering.encode(change(Operation.UPDATE, new BsonDocument()), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("filter")
        .hasRootCauseMessage("bad filter");
  }

  @Test
  void aMapperFailureIsAnEncodingErrorNamingTheChange() {
    MessageEncoder<Object> enc = MessageEncoder.builder(d -> { throw new IllegalArgumentException("not JSON"); }).build();
    ChangeEvent<Object> c = new ChangeEvent<>("chg-3", "s", Position.of("tok-3"), Operation.INSERT, "k", null, new Object(), null, null);
    assertThatThrownBy(() -> enc.encode(c, FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("chg-3")
        .hasMessageContaining("tok-3")
        .hasMessageContaining("not JSON");
  }

  @Test
  void jacksonMapperHandlesMaps() {
    MessageEncoder<Map<String, Object>> enc = MessageEncoder.<Map<String, Object>>builder(DocumentMapper.jackson(new ObjectMapper())).build();
    ChangeEvent<Map<String, Object>> c = new ChangeEvent<>("chg-4", "public.orders", Position.of("0/16B3748"),
        Operation.INSERT, "7", Map.of("id", 7), Map.of("id", 7, "status", "new"), null, null);
    Envelope e = Envelope.parse(enc.encode(c, FENCE).get(0).body());
    assertThat(e.document().get("status").asText()).isEqualTo("new");
    assertThat(e.position()).isEqualTo("0/16B3748");
  }

  @Test
  void readersRejectUnknownVersionsAndNonEnvelopes() {
    assertThatThrownBy(() -> Envelope.parse("{\"envelope\":\"sluice/2\",\"kind\":\"change\",\"id\":\"x\"}".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(SluiceException.class)
        .hasMessageContaining("sluice/2");
    assertThatThrownBy(() -> Envelope.parse("not json".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(SluiceException.class)
        .hasMessageContaining("not JSON");
    assertThatThrownBy(() -> Envelope.parse("{\"a\":1}".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(SluiceException.class)
        .hasMessageContaining("not a Sluice envelope");
  }

  @Test
  void configurationErrorsNameTheParameter() {
    assertThatThrownBy(() -> Publication.domainEvents(" ", "id"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("domain event field");
    assertThatThrownBy(() -> bson().filter(null))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("filter");
  }
}
