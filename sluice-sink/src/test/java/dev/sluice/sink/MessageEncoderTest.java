package dev.sluice.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.bson.BsonArray;
import org.bson.BsonBinary;
import org.bson.BsonBoolean;
import org.bson.BsonDateTime;
import org.bson.BsonDecimal128;
import org.bson.BsonDocument;
import org.bson.BsonDouble;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonMaxKey;
import org.bson.BsonMinKey;
import org.bson.BsonNull;
import org.bson.BsonObjectId;
import org.bson.BsonRegularExpression;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
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

  /** An update read with updateLookup: the document is whatever it is when read. */
  private static ChangeEvent<BsonDocument> lookedUp(BsonDocument current, BsonDocument changedFields) {
    return new ChangeEvent<>("chg-1", "shop.orders", new Position("tok-9", T), Operation.UPDATE, "k1",
        new BsonDocument("_id", new BsonString("k1")), current, T, null, DocumentState.CURRENT, changedFields);
  }

  private static BsonDocument event(String id) {
    return new BsonDocument("id", new BsonString(id)).append("type", new BsonString("T-" + id));
  }

  @Test
  void anUpdatesDomainEventIsTheOneItSetNotTheOneInTheLaterLookedUpDocument() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("lastEvent", "id")).build();
    BsonDocument later = new BsonDocument("_id", new BsonString("k1")).append("lastEvent", event("e2"));

    assertThat(enc.encode(lookedUp(later, new BsonDocument("lastEvent", event("e1"))), FENCE))
        .singleElement()
        .satisfies(m -> {
          assertThat(m.id()).isEqualTo("e1");
          assertThat(Envelope.parse(m.body()).event().get("type").asText()).isEqualTo("T-e1");
        });
    // deleted since: the lookup is null, the update's own event is still published
    assertThat(enc.encode(lookedUp(null, new BsonDocument("lastEvent", event("e1"))), FENCE))
        .extracting(OutboundMessage::id).containsExactly("e1");
    // a whole parent set, a nested field
    MessageEncoder<BsonDocument> nested = bson().publication(Publication.domainEvents("state.lastEvent", "id")).build();
    assertThat(nested.encode(lookedUp(null, new BsonDocument("state", new BsonDocument("lastEvent", event("e3")))), FENCE))
        .extracting(OutboundMessage::id).containsExactly("e3");
  }

  @Test
  void appendedArrayElementsArePublishedInIndexOrderAndEditsOfOldEventsAreNot() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("events", "id")).build();
    BsonDocument changed = new BsonDocument("events.4", event("e4"))
        .append("events.3", event("e3"))
        .append("events.1.type", new BsonString("edited")) // an old event changed in place
        .append("total", new BsonInt64(9));
    assertThat(enc.encode(lookedUp(null, changed), FENCE)).extracting(OutboundMessage::id).containsExactly("e3", "e4");
  }

  @Test
  void anEventChangedInPlaceIsCompletedFromTheLookupOnlyWhileItStillHoldsThatEvent() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("lastEvent", "id")).build();
    BsonDocument partial = new BsonDocument("lastEvent.id", new BsonString("e5"));
    BsonDocument same = new BsonDocument("_id", new BsonString("k1")).append("lastEvent", event("e5"));
    assertThat(enc.encode(lookedUp(same, partial), FENCE)).singleElement()
        .satisfies(m -> assertThat(Envelope.parse(m.body()).event().get("type").asText()).isEqualTo("T-e5"));

    BsonDocument movedOn = new BsonDocument("_id", new BsonString("k1")).append("lastEvent", event("e6"));
    assertThatThrownBy(() -> enc.encode(lookedUp(movedOn, partial), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("chg-1")
        .hasMessageContaining("lastEvent.id")
        .hasMessageContaining("holds another event")
        .hasMessageContaining("post-images");
  }

  @Test
  void aChangeWithoutAnEventIsCountedAndLoggedOrParkedAsConfiguredAndDeletesAreNeither() {
    MessageEncoder<BsonDocument> counting = bson().publication(Publication.domainEvents("lastEvent", "id")).build();
    BsonDocument current = new BsonDocument("_id", new BsonString("k1")).append("lastEvent", event("e1"));
    // the update set other fields: the event in the looked-up document is an older write's
    assertThat(counting.encode(lookedUp(current, new BsonDocument("total", new BsonInt64(1))), FENCE)).isEmpty();
    assertThat(counting.encode(change(Operation.INSERT, new BsonDocument("_id", new BsonString("k1"))), FENCE)).isEmpty();
    assertThat(counting.encode(change(Operation.DELETE, null), FENCE)).isEmpty();
    assertThat(counting.changesWithoutEvent()).isEqualTo(2);

    MessageEncoder<BsonDocument> parking = bson()
        .publication(Publication.domainEvents("lastEvent", "id", Publication.MissingEvent.PARK)).build();
    assertThatThrownBy(() -> parking.encode(lookedUp(current, new BsonDocument("total", new BsonInt64(1))), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("the update did not set the domain event field 'lastEvent'");
    assertThatThrownBy(() -> parking.encode(change(Operation.INSERT, new BsonDocument("_id", new BsonString("k1"))), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("the document has no domain event in field 'lastEvent'");
    assertThat(parking.encode(change(Operation.DELETE, null), FENCE)).isEmpty();
  }

  @Test
  void aChangeMessageSaysWhetherItsDocumentIsTheChangesOwnAndCarriesTheChangedFields() {
    MessageEncoder<BsonDocument> enc = bson().build();
    BsonDocument later = new BsonDocument("_id", new BsonString("k1")).append("v", new BsonInt64(2));
    Envelope e = Envelope.parse(enc.encode(lookedUp(later, new BsonDocument("v", new BsonInt64(1))), FENCE).get(0).body());
    assertThat(e.documentState()).isEqualTo("CURRENT");
    assertThat(e.changedFields().get("v").asLong()).isEqualTo(1);
    assertThat(e.document().get("v").asLong()).isEqualTo(2);
    Envelope own = Envelope.parse(enc.encode(change(Operation.INSERT, later), FENCE).get(0).body());
    assertThat(own.documentState()).isEqualTo("AFTER_CHANGE");
    assertThat(own.changedFields()).isNull();
  }

  @Test
  void aPreImageIsPublishedAsBeforeAndAChangeWithoutOneHasNone() {
    MessageEncoder<BsonDocument> enc = bson().build();
    BsonDocument after = new BsonDocument("_id", new BsonString("k1")).append("v", new BsonInt64(2));
    BsonDocument before = new BsonDocument("_id", new BsonString("k1")).append("v", new BsonInt64(1));
    ChangeEvent<BsonDocument> update = new ChangeEvent<>("chg-2", "shop.orders", new Position("tok-10", T),
        Operation.UPDATE, "k1", new BsonDocument("_id", new BsonString("k1")), after, T, null,
        DocumentState.AFTER_CHANGE, new BsonDocument("v", new BsonInt64(2)), before);
    Envelope e = Envelope.parse(enc.encode(update, FENCE).get(0).body());
    assertThat(e.before().get("v").asLong()).isEqualTo(1);
    assertThat(e.document().get("v").asLong()).isEqualTo(2);
    assertThat(Envelope.parse(enc.encode(change(Operation.INSERT, after), FENCE).get(0).body()).before()).isNull();
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

  /**
   * The envelope is written straight from the BSON (the driver's relaxed JSON embedded as it is),
   * not through a tree: it must hold exactly the values the tree path gives, for every BSON type,
   * and the payload tree, built only on demand, must be that tree too.
   */
  @Test
  void theStreamedEnvelopeHoldsWhatTheTreeOfEachDocumentHoldsForEveryBsonType() throws Exception {
    BsonDocument doc = new BsonDocument("_id", new BsonString("k1"))
        .append("text", new BsonString("quote \" backslash \\ tab \t émoji \uD83D\uDE00 nul \u0000"))
        .append("int", new BsonInt32(-7))
        .append("long", new BsonInt64(Long.MAX_VALUE))
        .append("double", new BsonDouble(1.0))
        .append("nan", new BsonDouble(Double.NaN))
        .append("inf", new BsonDouble(Double.NEGATIVE_INFINITY))
        .append("decimal", new BsonDecimal128(new Decimal128(new BigDecimal("-0.000001"))))
        .append("date", new BsonDateTime(T.toEpochMilli()))
        .append("oldDate", new BsonDateTime(-62_000_000_000_000L))
        .append("oid", new BsonObjectId(new ObjectId("65f0c0ffee0000000000abcd")))
        .append("bin", new BsonBinary(new byte[] {0, 1, (byte) 255}))
        .append("uuid", new BsonBinary(UUID.fromString("123e4567-e89b-12d3-a456-426614174000")))
        .append("regex", new BsonRegularExpression("^a.*\\d$", "im"))
        .append("ts", new BsonTimestamp(1_700_000_000, 7))
        .append("min", new BsonMinKey())
        .append("max", new BsonMaxKey())
        .append("nil", BsonNull.VALUE)
        .append("bool", BsonBoolean.TRUE)
        .append("nested", new BsonArray(List.of(new BsonDocument("a", new BsonArray()),
            new BsonArray(List.of(new BsonDocument())))));
    BsonDocument changed = new BsonDocument("nested.0.a", new BsonArray());
    BsonDocument before = new BsonDocument("_id", new BsonString("k1")).append("int", new BsonInt32(-6));
    ChangeEvent<BsonDocument> c = new ChangeEvent<>("chg-9", "shop.orders", new Position("tok-9", T),
        Operation.UPDATE, "k1", new BsonDocument("_id", new BsonString("k1")), doc, T, null,
        DocumentState.AFTER_CHANGE, changed, before);
    OutboundMessage<BsonDocument> m = bson().build().encode(c, FENCE).get(0);

    DocumentMapper<BsonDocument> tree = DocumentMapper.bson();
    Envelope e = Envelope.parse(m.body());
    assertThat(e.document()).isEqualTo(tree.toJson(doc));
    assertThat(e.documentKey()).isEqualTo(tree.toJson(c.documentKey()));
    assertThat(e.changedFields()).isEqualTo(tree.toJson(changed));
    assertThat(e.before()).isEqualTo(tree.toJson(before));
    assertThat(m.payload()).isEqualTo(tree.toJson(doc));
  }

  @Test
  void aFailureWhileWritingTheDocumentIsAnEncodingErrorNamingTheField() {
    DocumentMapper<BsonDocument> failing = new DocumentMapper<>() {
      @Override
      public JsonNode toJson(BsonDocument d) {
        throw new IllegalStateException("unused");
      }

      @Override
      public void writeJson(BsonDocument d, JsonGenerator out) throws Exception {
        if (d.containsKey("bad")) {
          throw new IOException("cannot write field 'bad'");
        }
        out.writeRawValue(d.toJson());
      }
    };
    ChangeEvent<BsonDocument> c = change(Operation.INSERT, new BsonDocument("bad", new BsonString("x")));
    assertThatThrownBy(() -> MessageEncoder.builder(failing).build().encode(c, FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("chg-1")
        .hasMessageContaining("cannot convert the document to JSON")
        .hasRootCauseMessage("cannot write field 'bad'");
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

  /**
   * ADR 0096: a logical-decoding message (operation MESSAGE) published as domain events is one
   * event, its JSON content; content that is not a JSON object is a clear encoding error naming
   * the prefix, never dropped.
   */
  @Test
  void aMessagesJsonContentIsTheDomainEventAndOtherContentIsNamed() {
    MessageEncoder<BsonDocument> enc = bson().publication(Publication.domainEvents("unused", "eventId")).build();
    BsonDocument message = new BsonDocument("prefix", new BsonString("outbox:7"))
        .append("content", new BsonString("{\"eventId\": \"e-7\", \"type\": \"OrderPlaced\"}"))
        .append("transactional", org.bson.BsonBoolean.TRUE);
    assertThat(enc.encode(change(Operation.MESSAGE, message), FENCE)).singleElement()
        .satisfies(m -> assertThat(m.id()).isEqualTo("e-7"));
    BsonDocument notJson = message.clone().append("content", new BsonString("plain text"));
    assertThatThrownBy(() -> enc.encode(change(Operation.MESSAGE, notJson), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("prefix 'outbox:7'")
        .hasMessageContaining("is not JSON");
    BsonDocument array = message.clone().append("content", new BsonString("[1, 2]"));
    assertThatThrownBy(() -> enc.encode(change(Operation.MESSAGE, array), FENCE))
        .isInstanceOf(MessageEncodingException.class)
        .hasMessageContaining("holds ARRAY");
  }
}
