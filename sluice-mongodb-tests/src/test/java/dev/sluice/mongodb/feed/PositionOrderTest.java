package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.Position;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.junit.jupiter.api.Test;

/**
 * How the shared reader places MongoDB positions (ADR 0074): by the resume token's key string, an
 * operation time before every change at that time, and nothing for tokens it cannot read.
 */
class PositionOrderTest {
  /** A resume token of the form MongoDB 4.2+ writes: KeyString hex, cluster time first. */
  private static Position token(int seconds, int inc, String rest) {
    String data = String.format("82%08X%08X", seconds, inc) + rest;
    return StreamStart.after(new BsonDocument("_data", new BsonString(data))).toPosition(null);
  }

  private static Position at(int seconds, int inc) {
    return StreamStart.at(new BsonTimestamp(seconds, inc)).toPosition(null);
  }

  @Test
  void tokensSortByClusterTimeThenByTheRestOfTheirKeyString() {
    String a = StreamStart.sortKey(token(1_700_000_000, 1, "2B022C0100296E5A1004AB"));
    String b = StreamStart.sortKey(token(1_700_000_000, 2, "2B022C0100296E5A1004AB"));
    String c = StreamStart.sortKey(token(1_700_000_001, 1, "2B022C0100296E5A1004AB"));
    String d = StreamStart.sortKey(token(1_700_000_001, 1, "2B022C0100296E5A1004AC"));
    assertThat(a).isLessThan(b);
    assertThat(b).isLessThan(c);
    assertThat(c).isLessThan(d);
    // Lower-case hex reads the same.
    Position lower = StreamStart.after(new BsonDocument("_data", new BsonString(
        String.format("82%08x%08x", 1_700_000_000, 1) + "2b022c0100296e5a1004ab"))).toPosition(null);
    assertThat(StreamStart.sortKey(lower)).isEqualTo(a);
  }

  @Test
  void anOperationTimeSortsBeforeEveryChangeAtThatTimeAndAfterEveryEarlierOne() {
    String start = StreamStart.sortKey(at(1_700_000_000, 5));
    assertThat(start).isLessThan(StreamStart.sortKey(token(1_700_000_000, 5, "2B022C01")));
    assertThat(start).isLessThan(StreamStart.sortKey(token(1_700_000_000, 5, "")));
    assertThat(start).isGreaterThan(StreamStart.sortKey(token(1_700_000_000, 4, "2B022C01")));
    assertThat(start).isGreaterThan(StreamStart.sortKey(at(1_700_000_000, 4)));
  }

  @Test
  void anInvalidateTokenSortsWhereItsTokenDoes() {
    BsonDocument t = new BsonDocument("_data", new BsonString(String.format("82%08X%08X", 1_700_000_000, 3) + "2B04"));
    assertThat(StreamStart.sortKey(StreamStart.afterInvalidate(t).toPosition(null)))
        .isEqualTo(StreamStart.sortKey(StreamStart.after(t).toPosition(null)));
  }

  @Test
  void tokensOfOtherFormsCannotBePlaced() {
    // MongoDB 3.6/4.0 binary tokens, the stock embedded server's short hex, anything else.
    assertThat(StreamStart.sortKey(StreamStart.after(new BsonDocument("_data",
        new org.bson.BsonBinary(new byte[] {1, 2, 3}))).toPosition(null))).isNull();
    assertThat(StreamStart.sortKey(StreamStart.after(new BsonDocument("_data", new BsonString("65a1b2c3")))
        .toPosition(null))).isNull();
    assertThat(StreamStart.sortKey(StreamStart.after(new BsonDocument("_data", new BsonString(
        "82" + "Z".repeat(16)))).toPosition(null))).isNull();
    assertThat(StreamStart.sortKey(Position.of("{\"something\": 1}"))).isNull();
  }
}
