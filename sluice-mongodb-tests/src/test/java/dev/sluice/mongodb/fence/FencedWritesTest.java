package dev.sluice.mongodb.fence;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.listener.Fence;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class FencedWritesTest {

  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static MongoCollection<Document> fresh() {
    return MONGO.client().getDatabase("fence").getCollection("t" + COLLECTIONS.incrementAndGet());
  }

  private static Fence fence(long epoch) {
    return new Fence("orders#0", "owner-" + epoch, epoch);
  }

  @Test
  void aWriteFromAnOlderEpochIsRejectedOnceANewerOneWasApplied() {
    MongoCollection<Document> view = fresh();
    FencedWrites.updateOne(view, "a", Updates.set("v", "from-2"), fence(2));
    FencedWrites.updateOne(view, "a", Updates.set("w", "again-2"), fence(2));

    assertThatThrownBy(() -> FencedWrites.updateOne(view, "a", Updates.set("v", "from-1"), fence(1)))
        .isInstanceOf(StaleFenceException.class)
        .hasMessageContaining("epoch 1")
        .hasMessageContaining("_id=a");
    Document d = view.find(Filters.eq("_id", "a")).first();
    assertThat(d.getString("v")).isEqualTo("from-2");
    assertThat(d.getString("w")).isEqualTo("again-2");
    assertThat(FencedWrites.fencedEpoch(d, "orders#0")).isEqualTo(2L);

    FencedWrites.replaceOne(view, "a", new Document("v", "from-3"), fence(3));
    assertThatThrownBy(
            () -> FencedWrites.replaceOne(view, "a", new Document("v", "from-2"), fence(2)))
        .isInstanceOf(StaleFenceException.class);
    d = view.find(Filters.eq("_id", "a")).first();
    assertThat(d).containsEntry("v", "from-3").doesNotContainKey("w");
    assertThat(FencedWrites.fencedEpoch(d, "orders#0")).isEqualTo(3L);
  }

  @Test
  void fencesAreScopedPerLeaseSoTwoStreamsCanWriteOneDocument() {
    MongoCollection<Document> summary = fresh();
    Fence orders = new Fence("totals/shop.orders#0of1", "a", 1_000_000L);
    Fence refunds = new Fence("totals/shop.refunds#0of1", "b", 7L);
    FencedWrites.updateOne(summary, "day-1", Updates.inc("orders", 1), orders);
    // The refunds lease has a much lower epoch: it is no older, just another lease.
    FencedWrites.updateOne(summary, "day-1", Updates.inc("refunds", 1), refunds);
    FencedWrites.replaceOne(summary, "day-1", new Document("orders", 5).append("refunds", 1), orders);
    FencedWrites.updateOne(summary, "day-1", Updates.inc("refunds", 1), refunds);
    assertThatThrownBy(() -> FencedWrites.updateOne(summary, "day-1", Updates.inc("refunds", 1),
        new Fence(refunds.lease(), "stale", 6L)))
        .as("still fenced within the lease").isInstanceOf(StaleFenceException.class);
    Document d = summary.find().first();
    assertThat(d.getInteger("orders")).isEqualTo(5);
    assertThat(d.getInteger("refunds")).isEqualTo(2);
    assertThat(FencedWrites.fencedEpoch(d, orders.lease())).isEqualTo(1_000_000L);
    assertThat(FencedWrites.fencedEpoch(d, refunds.lease())).isEqualTo(7L);
  }

  @Test
  void seedFigure3PausedOwnersLateWriteIsRejected() {
    MongoCollection<Document> a = fresh();
    // p1 (epoch 1) received B v2 and paused; its lease expired; p2 (epoch 2) took over.
    FencedWrites.updateOne(a, "A", Updates.set("b", "v2"), fence(2));
    FencedWrites.updateOne(a, "A", Updates.set("b", "v3"), fence(2));
    // p1 wakes up and writes its B v2.
    assertThatThrownBy(() -> FencedWrites.updateOne(a, "A", Updates.set("b", "v2"), fence(1)))
        .isInstanceOf(StaleFenceException.class);
    assertThat(a.find().first().getString("b")).isEqualTo("v3");
  }

  // The embedded server serializes commands, so two upserts never both miss here and the
  // insert-race retry (ADR 0013) is not reached (FakeUpsertRaceCollection covers it); this
  // checks convergence under concurrency.
  @Test
  void concurrentUpsertsOfAnAbsentDocumentNeverLetAnOlderEpochWin() throws Exception {
    int writers = 8;
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    try {
      for (int round = 0; round < 25; round++) {
        MongoCollection<Document> view = fresh();
        CountDownLatch go = new CountDownLatch(1);
        List<Future<Boolean>> outcomes = new ArrayList<>();
        for (int w = 1; w <= writers; w++) {
          long epoch = w;
          outcomes.add(
              pool.submit(
                  () -> {
                    go.await();
                    try {
                      FencedWrites.updateOne(view, "k", Updates.set("by", epoch), fence(epoch));
                      return true;
                    } catch (StaleFenceException e) {
                      return false;
                    }
                  }));
        }
        go.countDown();
        List<Boolean> applied = new ArrayList<>();
        for (Future<Boolean> f : outcomes) {
          applied.add(f.get(30, TimeUnit.SECONDS));
        }
        assertThat(applied.get(writers - 1))
            .as("round %d: the newest epoch always applies, race or not", round)
            .isTrue();
        Document d = view.find().first();
        assertThat(d.getLong("by")).as("round %d", round).isEqualTo((long) writers);
        assertThat(FencedWrites.fencedEpoch(d, "orders#0")).isEqualTo((long) writers);
        assertThat(view.countDocuments()).isEqualTo(1);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aLostInsertRaceIsRetriedAgainstTheWinnersFenceAndOnlyASecondLossIsStale() {
    int[] calls = {0};
    // Lost the insert race to a concurrent creator (possibly an older epoch): retry, and the
    // retry matches the now-existing document.
    var raced =
        FakeUpsertRaceCollection.scripted(
            FakeUpsertRaceCollection.script(
                FakeUpsertRaceCollection.DUPLICATE_KEY, FakeUpsertRaceCollection.matched()),
            calls);
    FencedWrites.updateOne(raced, FakeUpsertRaceCollection.id(), Updates.set("v", 1), fence(5));
    assertThat(calls[0]).isEqualTo(2);

    // The document exists with a newer fence: miss + E11000 twice means stale.
    calls[0] = 0;
    var newer =
        FakeUpsertRaceCollection.scripted(
            FakeUpsertRaceCollection.script(
                FakeUpsertRaceCollection.DUPLICATE_KEY, FakeUpsertRaceCollection.DUPLICATE_KEY),
            calls);
    assertThatThrownBy(
            () ->
                FencedWrites.updateOne(
                    newer, FakeUpsertRaceCollection.id(), Updates.set("v", 1), fence(5)))
        .isInstanceOf(StaleFenceException.class);
    assertThat(calls[0]).isEqualTo(2);
  }

  @Test
  void sourceVersionsApplyOnlyWhenNewerAndReplaysAreNotErrors() {
    MongoCollection<Document> view = fresh();
    assertThat(FencedWrites.updateIfNewer(view, "A", "bVersion", 2, Updates.set("b", "v2"))).isTrue();
    assertThat(FencedWrites.updateIfNewer(view, "A", "bVersion", 3, Updates.set("b", "v3"))).isTrue();
    assertThat(FencedWrites.updateIfNewer(view, "A", "bVersion", 2, Updates.set("b", "v2")))
        .as("an older version is not applied")
        .isFalse();
    assertThat(FencedWrites.updateIfNewer(view, "A", "bVersion", 3, Updates.set("b", "v3-replayed")))
        .as("a replay of the current version is not applied")
        .isFalse();
    Document d = view.find().first();
    assertThat(d.getString("b")).isEqualTo("v3");
    assertThat(d.getLong("bVersion")).isEqualTo(3L);
    assertThatThrownBy(
            () ->
                fence(1)
                    .requireApplied(
                        FencedWrites.updateIfNewer(view, "A", "bVersion", 1, Updates.set("b", "v1")),
                        "A"))
        .as("a handler that wants the seed's stop-on-stale behaviour gets it")
        .isInstanceOf(StaleFenceException.class);
  }

  @Test
  void concurrentVersionedUpsertsConvergeToTheNewestVersion() throws Exception {
    int writers = 8;
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    try {
      for (int round = 0; round < 25; round++) {
        MongoCollection<Document> view = fresh();
        CountDownLatch go = new CountDownLatch(1);
        List<Future<Boolean>> outcomes = new ArrayList<>();
        for (int v = 1; v <= writers; v++) {
          long version = v;
          outcomes.add(
              pool.submit(
                  () -> {
                    go.await();
                    return FencedWrites.updateIfNewer(
                        view, "k", "version", version, Updates.set("value", version));
                  }));
        }
        go.countDown();
        assertThat(outcomes.get(writers - 1).get(30, TimeUnit.SECONDS)).isTrue();
        for (Future<Boolean> f : outcomes) {
          f.get(30, TimeUnit.SECONDS);
        }
        Document d = view.find().first();
        assertThat(d.getLong("value")).isEqualTo((long) writers);
        assertThat(d.getLong("version")).isEqualTo((long) writers);
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
