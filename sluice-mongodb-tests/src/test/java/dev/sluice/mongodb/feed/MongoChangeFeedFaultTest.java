package dev.sluice.mongodb.feed;

import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.change;
import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.serverError;
import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.token;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.MongoSocketReadException;
import com.mongodb.ServerAddress;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.UndecodableChange;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * Behaviour only a real replica set shows, driven through {@link FakeChangeStreamCursor} (a
 * driver-level fake; no available server produces these).
 */
class MongoChangeFeedFaultTest {

  private static final Duration WAIT = Duration.ofMillis(20);

  private final FakeStreamSource source = new FakeStreamSource();

  private MongoChangeFeedImpl feed(boolean split) {
    return new MongoChangeFeedImpl(FakeStreamSource.settings("d.c", split), source);
  }

  private static Position positionAfter(int n) {
    return StreamStart.after(token(n)).toPosition(Instant.ofEpochSecond(1_700_000_000 + n));
  }

  @ParameterizedTest
  @CsvSource({"280, ChangeStreamFatalError", "260, InvalidResumeToken"})
  void aResumeTokenThatIsNotThisStreamsStopsTheCursorNamingStreamAndPositionInsteadOfLosingHistory(
      int code, String name) {
    FakeChangeStreamCursor cursor =
        new FakeChangeStreamCursor().event(change(1, "insert", "a")).fail(serverError(code, name));
    source.willOpen(cursor);
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.oldest());
    assertThat(c.poll(WAIT)).extracting(ChangeEvent::key).containsExactly("a");

    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOf(FeedException.class)
        .isNotInstanceOf(HistoryLostException.class)
        .satisfies(e -> assertThat(((FeedException) e).retryable()).isFalse())
        .hasMessageContaining("'d.c'")
        .hasMessageContaining(positionAfter(1).token())
        .hasMessageContaining("error " + code + " " + name)
        .hasMessageContaining("does not belong to this stream")
        .hasMessageContaining("Nothing was skipped");
    assertThat(cursor.closed()).isTrue();

    // The same when the checkpoint is refused as the cursor opens.
    source.willFailToOpen(serverError(code, name));
    assertThatThrownBy(() -> feed(false).open(PartitionSpec.single(), StartPoint.after(positionAfter(7))))
        .isInstanceOf(FeedException.class)
        .isNotInstanceOf(HistoryLostException.class)
        .hasMessageContaining(positionAfter(7).token());
  }

  @Test
  void historyLostWhileReadingNamesTheLostPositionAndTheOldestAvailable() {
    int code = 286;
    String name = "ChangeStreamHistoryLost";
    FakeChangeStreamCursor cursor =
        new FakeChangeStreamCursor().event(change(1, "insert", "a")).fail(serverError(code, name));
    source.willOpen(cursor);
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.oldest());
    List<ChangeEvent<BsonDocument>> first = c.poll(WAIT);
    assertThat(first).extracting(ChangeEvent::key).containsExactly("a");

    // The event before the error was delivered; the error surfaces on the next poll.
    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOfSatisfying(
            HistoryLostException.class,
            e -> {
              assertThat(e.lostFrom()).isEqualTo(positionAfter(1));
              assertThat(e.oldestAvailable()).isEqualTo(Instant.ofEpochSecond(1_600_000_000));
              assertThat(e.reason()).contains(String.valueOf(code)).contains(name);
              assertThat(e.retryable()).isFalse();
            })
        .hasMessageContaining(positionAfter(1).token());
    assertThat(cursor.closed()).isTrue();
  }

  @Test
  void historyLostWhenOpeningAtACheckpointNamesTheCheckpoint() {
    source.willFailToOpen(serverError(286, "ChangeStreamHistoryLost"));
    Position checkpoint = positionAfter(7);
    assertThatThrownBy(
            () -> feed(false).open(PartitionSpec.single(), StartPoint.after(checkpoint)))
        .isInstanceOfSatisfying(
            HistoryLostException.class, e -> assertThat(e.lostFrom()).isEqualTo(checkpoint));
    assertThat(source.openedAt).containsExactly(StreamStart.after(token(7)));
  }

  @Test
  void oldestRetriesOnceWhenTheOldestEntryRollsOffWhileOpening() {
    source.willFailToOpen(serverError(286, "ChangeStreamHistoryLost"));
    source.willOpen(new FakeChangeStreamCursor().event(change(1, "insert", "a")));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.oldest());
    assertThat(c.poll(WAIT)).extracting(ChangeEvent::key).containsExactly("a");
    assertThat(source.openedAt).hasSize(2);

    source.willFailToOpen(serverError(286, "ChangeStreamHistoryLost"));
    source.willFailToOpen(serverError(286, "ChangeStreamHistoryLost"));
    assertThatThrownBy(() -> feed(false).open(PartitionSpec.single(), StartPoint.oldest()))
        .isInstanceOf(HistoryLostException.class);
  }

  @Test
  void invalidateEndsTheStreamAfterTheChangesBeforeIt() {
    BsonDocument invalidate =
        new BsonDocument("_id", token(3))
            .append("operationType", new BsonString("invalidate"))
            .append("clusterTime", new BsonTimestamp(1_700_000_003, 1));
    source.willOpen(
        new FakeChangeStreamCursor()
            .event(change(1, "insert", "a"))
            .event(change(2, "drop", null))
            .event(invalidate)
            .event(change(4, "insert", "never")));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    List<ChangeEvent<BsonDocument>> events = c.poll(WAIT);
    assertThat(events).extracting(ChangeEvent::operation)
        .containsExactly(Operation.INSERT, Operation.OTHER);
    assertThat(c.ended()).isTrue();
    assertThat(c.position()).isEqualTo(positionAfter(2));
    assertThat(c.poll(WAIT)).isEmpty();
    assertThat(c.endReason()).contains("'d.c'").contains("dropped, renamed or replaced")
        .contains(positionAfter(2).token()).contains("onInvalidate(START_AFTER)");
  }

  @Test
  void underStartAfterTheStreamGoesOnAfterTheInvalidateAndTheCheckpointSaysSo() {
    BsonDocument invalidate =
        new BsonDocument("_id", token(3))
            .append("operationType", new BsonString("invalidate"))
            .append("clusterTime", new BsonTimestamp(1_700_000_003, 1));
    source.willOpen(new FakeChangeStreamCursor()
        .event(change(1, "insert", "a")).event(change(2, "drop", null)).event(invalidate));
    source.willOpen(new FakeChangeStreamCursor().event(change(4, "insert", "b")));
    MongoChangeFeedImpl feed = new MongoChangeFeedImpl(
        FakeStreamSource.settings("d.c", false, MongoChangeFeed.OnInvalidate.START_AFTER), source);
    FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), StartPoint.latest());

    List<ChangeEvent<BsonDocument>> events = new java.util.ArrayList<>(c.poll(WAIT));
    events.addAll(c.poll(WAIT));
    assertThat(events).extracting(ChangeEvent::key).containsExactly("a", "", "b");
    assertThat(c.ended()).isFalse();
    assertThat(source.openedAt).hasSize(2);
    assertThat(source.openedAt.get(1)).isEqualTo(StreamStart.afterInvalidate(token(3)));

    // A crash right after the invalidate: the committed position reopens with startAfter.
    Position afterInvalidate = StreamStart.afterInvalidate(token(3)).toPosition(Instant.ofEpochSecond(1_700_000_003));
    assertThat(afterInvalidate.token()).contains("startAfter");
    source.willOpen(new FakeChangeStreamCursor().event(change(4, "insert", "b")));
    feed.open(PartitionSpec.single(), StartPoint.after(afterInvalidate)).close();
    assertThat(source.openedAt.get(2)).isEqualTo(StreamStart.afterInvalidate(token(3)));
  }

  @Test
  void anOversizedEventIsAClearNonRetryableErrorNamingThePosition() {
    source.willOpen(
        new FakeChangeStreamCursor()
            .event(change(1, "insert", "a"))
            .fail(serverError(10334, "BSONObjectTooLarge")));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    c.poll(WAIT);
    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOfSatisfying(FeedException.class, e -> assertThat(e.retryable()).isFalse())
        .isNotInstanceOf(HistoryLostException.class)
        .hasMessageContaining("10334")
        .hasMessageContaining("16 MB")
        .hasMessageContaining("splitLargeEvents")
        .hasMessageContaining(positionAfter(1).token());
    // A failed cursor keeps failing instead of pretending to be idle.
    assertThatThrownBy(() -> c.poll(WAIT)).isInstanceOf(FeedException.class);
  }

  @Test
  void splitFragmentsAreReassembledIntoOneChange() {
    BsonDocument whole = change(2, "update", "big");
    BsonDocument first =
        new BsonDocument("_id", token(21))
            .append("splitEvent", new BsonDocument("fragment", new BsonInt32(1)).append("of", new BsonInt32(2)))
            .append("operationType", whole.get("operationType"))
            .append("clusterTime", whole.get("clusterTime"))
            .append("documentKey", whole.get("documentKey"));
    BsonDocument second =
        new BsonDocument("_id", token(22))
            .append("splitEvent", new BsonDocument("fragment", new BsonInt32(2)).append("of", new BsonInt32(2)))
            .append("fullDocument", whole.get("fullDocument"))
            .append("updateDescription", whole.get("updateDescription"));
    source.willOpen(
        new FakeChangeStreamCursor()
            .event(change(1, "insert", "a"))
            .event(first)
            .emptyBatch(token(21))
            .event(second));
    FeedCursor<BsonDocument> c = feed(true).open(PartitionSpec.single(), StartPoint.latest());

    assertThat(c.poll(WAIT)).extracting(ChangeEvent::key).containsExactly("a");
    assertThat(c.position())
        .as("never a position inside a split event, even with a post-batch token there")
        .isEqualTo(positionAfter(1));
    List<ChangeEvent<BsonDocument>> big = c.poll(WAIT);
    assertThat(big).hasSize(1);
    assertThat(big.get(0).operation()).isEqualTo(Operation.UPDATE);
    assertThat(big.get(0).key()).isEqualTo("big");
    assertThat(big.get(0).document()).isEqualTo(whole.getDocument("fullDocument"));
    assertThat(big.get(0).position().token()).isEqualTo(StreamStart.after(token(22)).toPosition(null).token());
    assertThat(c.position()).isEqualTo(big.get(0).position());
  }

  @Test
  void aSplitFragmentWithoutTheOptionIsAClearError() {
    BsonDocument fragment =
        change(5, "update", "big")
            .append("splitEvent", new BsonDocument("fragment", new BsonInt32(1)).append("of", new BsonInt32(3)));
    source.willOpen(new FakeChangeStreamCursor().event(fragment));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOf(FeedException.class)
        .hasMessageContaining("splitLargeEvents(true)");
  }

  @Test
  void aNetworkErrorIsRetryableAndAnAuthorizationErrorIsNot() {
    source.willOpen(
        new FakeChangeStreamCursor()
            .fail(new MongoSocketReadException("connection reset", new ServerAddress("fake", 1))));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOfSatisfying(FeedException.class, e -> assertThat(e.retryable()).isTrue())
        .hasMessageContaining("connection reset");

    source.willFailToOpen(serverError(13, "Unauthorized"));
    assertThatThrownBy(() -> feed(false).open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> assertThat(e.retryable()).isFalse())
        .hasMessageContaining("Unauthorized");

    source.willOpen(new FakeChangeStreamCursor().fail(serverError(10107, "NotWritablePrimary")));
    FeedCursor<BsonDocument> failover = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    assertThatThrownBy(() -> failover.poll(WAIT))
        .isInstanceOfSatisfying(FeedException.class, e -> assertThat(e.retryable()).isTrue());
  }

  @Test
  void aChangeWithoutResumeTokenStopsTheCursorNamingThePosition() {
    BsonDocument noToken = change(2, "insert", "b");
    noToken.remove("_id");
    source.willOpen(new FakeChangeStreamCursor().event(change(1, "insert", "a")).event(noToken));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    // The good change comes first; the bad one is an error on the next poll.
    assertThat(c.poll(WAIT)).extracting(ChangeEvent::key).containsExactly("a");
    assertThatThrownBy(() -> c.poll(WAIT))
        .isInstanceOfSatisfying(FeedException.class, e -> assertThat(e.retryable()).isFalse())
        .hasMessageContaining("no resume token")
        .hasMessageContaining(positionAfter(1).token());
    assertThat(c.position()).isEqualTo(positionAfter(1));
  }

  @Test
  void aChangeWithAPositionButNoDecodableContentIsHandedOnMarkedUndecodable() {
    BsonDocument noKey = change(3, "update", null);
    BsonDocument noType = change(4, "insert", "d");
    noType.remove("operationType");
    BsonDocument badFull = change(5, "insert", "e");
    badFull.put("fullDocument", new BsonString("not a document"));
    source.willOpen(
        new FakeChangeStreamCursor()
            .event(noKey)
            .event(noType)
            .event(badFull)
            .event(change(6, "insert", "f")));
    FeedCursor<BsonDocument> c =
        feed(false).open(PartitionSpec.single(), StartPoint.after(positionAfter(2)));

    List<ChangeEvent<BsonDocument>> events = c.poll(WAIT);

    assertThat(events).hasSize(4);
    ChangeEvent<BsonDocument> first = events.get(0);
    assertThat(first.raw()).isInstanceOf(UndecodableChange.class);
    UndecodableChange u = (UndecodableChange) first.raw();
    assertThat(u.reason())
        .contains("no document _id")
        .contains(positionAfter(3).token())
        .contains("d.c");
    assertThat(u.source()).isEqualTo(noKey);
    assertThat(first.key()).as("a key of its own, blocking no other key").startsWith("undecodable:");
    assertThat(first.operation()).isEqualTo(Operation.UPDATE);
    assertThat(first.position()).isEqualTo(positionAfter(3));

    assertThat(((UndecodableChange) events.get(1).raw()).reason()).contains("operationType");
    assertThat(events.get(1).key()).as("the document key when there is one").isEqualTo("d");
    assertThat(((UndecodableChange) events.get(2).raw()).reason()).contains("fullDocument");
    assertThat(events.get(3).raw()).isNotInstanceOf(UndecodableChange.class);
    assertThat(c.position()).isEqualTo(positionAfter(6));
  }

  @Test
  void aPostBatchResumeTokenAdvancesAnIdlePartition() {
    source.willOpen(new FakeChangeStreamCursor().emptyBatch(token(9)));
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.latest());
    Position start = c.position();
    assertThat(start.token()).contains("startAtOperationTime");
    assertThat(c.poll(WAIT)).isEmpty();
    assertThat(c.position().token()).isEqualTo(StreamStart.after(token(9)).toPosition(null).token());
  }

  @Test
  void oldestStartsAtTheOldestOplogEntryOrNowWhenTheOplogIsEmpty() {
    source.willOpen(new FakeChangeStreamCursor());
    FeedCursor<BsonDocument> c = feed(false).open(PartitionSpec.single(), StartPoint.oldest());
    assertThat(source.openedAt).containsExactly(StreamStart.at(new BsonTimestamp(1_600_000_000, 1)));
    assertThat(c.position().time()).isEqualTo(Instant.ofEpochSecond(1_600_000_000));
    assertThat(StreamStart.fromPosition(c.position()))
        .isEqualTo(StreamStart.at(new BsonTimestamp(1_600_000_000, 1)));

    source.oldest = null;
    source.willOpen(new FakeChangeStreamCursor());
    feed(false).open(PartitionSpec.single(), StartPoint.oldest());
    assertThat(source.openedAt.get(1)).isEqualTo(StreamStart.at(new BsonTimestamp(1_800_000_000, 1)));
  }
}
