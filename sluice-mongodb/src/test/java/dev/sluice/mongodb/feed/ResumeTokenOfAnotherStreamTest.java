package dev.sluice.mongodb.feed;

import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.change;
import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.serverError;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A checkpoint the server does not take as this stream's (errors 260 and 280 on MongoDB 5.0+: a
 * checkpoint of another collection or deployment, a restore) must stop the partition even under
 * {@link HistoryLostPolicy#SKIP_TO_LATEST}: skipping would silently drop every change since. The
 * errors come from a driver-level FAKE cursor ({@link FakeChangeStreamCursor}), because no
 * available server produces them; the lease store is the embedded MongoDB (or the server of
 * {@code -Dsluice.mongodb.uri}).
 */
class ResumeTokenOfAnotherStreamTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private Listener<BsonDocument> listener;

  @AfterEach
  void close() {
    if (listener != null) {
      listener.close();
    }
  }

  @ParameterizedTest
  @CsvSource({"260, InvalidResumeToken", "280, ChangeStreamFatalError"})
  void evenUnderSkipToLatestThePartitionStopsNamingTheStreamAndNothingIsSkipped(int code, String name) {
    FakeStreamSource source = new FakeStreamSource();
    source.willOpen(new FakeChangeStreamCursor().event(change(1, "insert", "a")).fail(serverError(code, name)));
    DefaultMongoChangeFeed feed =
        new DefaultMongoChangeFeed(FakeStreamSource.settings("shop.orders", false), source);
    LeaseStore store = MongoLeaseStore.builder(MONGO.freshDatabase()).build();
    List<String> delivered = new CopyOnWriteArrayList<>();

    listener = Listener.builder(feed, store)
        .group("indexer")
        .leaseDuration(Duration.ofSeconds(2))
        .onHistoryLost(HistoryLostPolicy.SKIP_TO_LATEST)
        .handler((e, f) -> delivered.add(e.key()))
        .build()
        .start();

    await().atMost(Duration.ofSeconds(10))
        .until(() -> listener.status().get(0).state() == PartitionState.FAILED);
    PartitionStatus status = listener.status().get(0);
    assertThat(status.error())
        .contains("shop.orders")
        .contains("error " + code + " " + name)
        .contains("Nothing was skipped")
        .doesNotContain("skipped to latest");
    assertThat(delivered).containsExactly("a");
    assertThat(source.openedAt).as("no re-open at latest").hasSize(1);
    assertThat(store.read("indexer/shop.orders#0of1").orElseThrow().checkpoint().token())
        .as("the checkpoint stays right after the last change delivered")
        .isEqualTo(StreamStart.after(FakeChangeStreamCursor.token(1)).toPosition(Instant.EPOCH).token());
  }
}
