package dev.sluice.testkit.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.deadletter.DeadLetters;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.deadletter.StaleParkException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite every {@link DeadLetterStore} passes (MongoDB, SQL), with the {@link
 * DeadLetters} operations on top: parking order per key, idempotent parking, exact round trip of
 * the change, replay in order that stops at the first failure, discard.
 */
public abstract class DeadLetterStoreContract {
  private DeadLetterStore<BsonDocument> store;

  /** A fresh, empty store (a new collection or table per call). */
  protected abstract DeadLetterStore<BsonDocument> newStore();

  /** Whether the store keeps {@link ChangeEvent#raw()} (MongoDB keeps BSON documents). */
  protected abstract boolean keepsRaw();

  @BeforeEach
  void createStore() {
    store = newStore();
  }

  private long count(String stream) {
    return store.list(stream, 10_000).size();
  }

  @Test
  void keepsParkingOrderPerKeyAndRoundTripsTheChangeExactly() {
    ChangeEvent<BsonDocument> a1 = change("a", 1);
    ChangeEvent<BsonDocument> b1 = change("b", 1);
    ChangeEvent<BsonDocument> a2 = change("a", 2);
    store.park(new ParkedChange<>(a1, 0, "IllegalStateException: boom", 5, Instant.parse("2026-01-01T00:00:00Z"), 7));
    store.park(new ParkedChange<>(b1, 1, "IllegalStateException: bang", 5, Instant.parse("2026-01-01T00:00:00Z"), 7));
    store.park(new ParkedChange<>(a2, 0, "parked behind " + a1.id(), 0, Instant.parse("2026-01-01T00:00:00Z"), 7));
    store.park(new ParkedChange<>(a1, 0, "again after a crash", 5, Instant.parse("2026-01-01T00:00:01Z"), 7));

    assertThat(count("orders")).isEqualTo(3);
    assertThat(store.parkedKeys("orders", 0, 10)).containsExactly("a");
    assertThat(store.parkedKeys("orders", 1, 10)).containsExactly("b");
    assertThat(store.list("orders", 10)).extracting(p -> p.event().id()).containsExactly(a1.id(), b1.id(), a2.id());
    List<ParkedChange<BsonDocument>> a = store.listKey("orders", "a");
    assertThat(a).extracting(p -> p.event().id()).containsExactly(a1.id(), a2.id());
    ParkedChange<BsonDocument> first = a.get(0);
    if (keepsRaw()) {
      assertThat(first.event()).usingRecursiveComparison().isEqualTo(a1);
    } else {
      assertThat(first.event()).usingRecursiveComparison().ignoringFields("raw").isEqualTo(a1);
      assertThat(first.event().raw()).isNull();
    }
    assertThat(first.error()).isEqualTo("IllegalStateException: boom");
    assertThat(first.attempts()).isEqualTo(5);
    assertThat(first.partition()).isZero();
    assertThat(a.get(1).attempts()).isZero();
    assertThat(first.epoch()).isEqualTo(7);
    assertThat(store.list("other", 10)).isEmpty();
  }

  @Test
  void hasParkedAnswersPerStreamPartitionAndKey() {
    store.park(new ParkedChange<>(change("a", 1), 0, "boom", 3, Instant.now(), 7));
    assertThat(store.hasParked("orders", 0, "a")).isTrue();
    assertThat(store.hasParked("orders", 0, "b")).isFalse();
    assertThat(store.hasParked("orders", 1, "a")).isFalse();
    assertThat(store.hasParked("other", 0, "a")).isFalse();
    store.remove("orders", change("a", 1).id());
    assertThat(store.hasParked("orders", 0, "a")).isFalse();
  }

  @Test
  void parkedKeysAreBoundedAndOldestFirst() {
    for (int k = 0; k < 30; k++) {
      for (int v = 1; v <= 3; v++) {
        store.park(new ParkedChange<>(change("k" + k, v), 0, "boom", 1, Instant.now(), 7));
      }
    }
    assertThat(store.parkedKeys("orders", 0, 5)).containsExactly("k0", "k1", "k2", "k3", "k4");
    assertThat(store.parkedKeys("orders", 0, 100)).hasSize(30);
    assertThatThrownBy(() -> store.parkedKeys("orders", 0, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("limit");
  }

  @Test
  void aParkFromAnOlderEpochThanOneThatParkedInThePartitionIsRefused() {
    store.park(new ParkedChange<>(change("a", 1), 0, "boom", 3, Instant.now(), 7));
    store.park(new ParkedChange<>(change("a", 2), 0, "behind", 0, Instant.now(), 7));
    store.park(new ParkedChange<>(change("b", 1), 0, "boom", 3, Instant.now(), 9));

    assertThatThrownBy(() -> store.park(new ParkedChange<>(change("c", 1), 0, "boom", 3, Instant.now(), 8)))
        .isInstanceOf(StaleParkException.class).hasMessageContaining("epoch 8")
        .hasMessageContaining("epoch 9").hasMessageContaining("partition 0");
    assertThat(store.hasParked("orders", 0, "c")).isFalse();
    // Other partitions and streams have their own epochs.
    store.park(new ParkedChange<>(change("c", 1), 1, "boom", 3, Instant.now(), 2));
    assertThat(store.hasParked("orders", 1, "c")).isTrue();
    assertThat(store.listKey("orders", "a")).extracting(ParkedChange::epoch).containsExactly(7L, 7L);
  }

  @Test
  void twoScopesOfOneStreamAreIndependent() {
    ChangeEvent<BsonDocument> a1 = change("a", 1);
    store.park(new ParkedChange<>(a1, 0, "boom", 3, Instant.now(), 9, "indexer/orders"));
    store.park(new ParkedChange<>(a1, 0, "bang", 3, Instant.now(), 2, "invalidator/orders"));

    assertThat(store.hasParked("indexer/orders", 0, "a")).isTrue();
    assertThat(store.hasParked("invalidator/orders", 0, "a")).isTrue();
    assertThat(store.hasParked("orders", 0, "a")).isFalse();
    assertThat(store.listKey("invalidator/orders", "a")).singleElement().satisfies(p -> {
      assertThat(p.error()).isEqualTo("bang");
      assertThat(p.scope()).isEqualTo("invalidator/orders");
      assertThat(p.event().stream()).isEqualTo("orders");
    });
    assertThat(store.remove("indexer/orders", a1.id())).isTrue();
    assertThat(store.hasParked("invalidator/orders", 0, "a")).isTrue();
  }

  @Test
  void replayRunsAKeysChangesInOrderRemovesEachOnSuccessAndStopsAtTheFirstFailure() {
    for (int v = 1; v <= 4; v++) {
      store.park(new ParkedChange<>(change("a", v), 0, "boom", v == 1 ? 3 : 0, Instant.now(), 7));
    }
    store.park(new ParkedChange<>(change("b", 1), 0, "boom", 3, Instant.now(), 7));
    List<String> handled = new ArrayList<>();
    Handler<BsonDocument> failsOnThird =
        (event, fence) -> {
          if (event.document().getInt32("v").getValue() == 3) {
            throw new IllegalStateException("still broken");
          }
          handled.add(event.id());
        };
    Fence fence = new Fence("replay:orders", "operator", 0);
    DeadLetters<BsonDocument> dlq = DeadLetters.of(store);

    DeadLetters.ReplayResult r = dlq.replayKey("orders", "a", failsOnThird, fence);

    assertThat(r.replayed()).isEqualTo(2);
    assertThat(r.remaining()).isEqualTo(2);
    assertThat(r.failedEventId()).isEqualTo(change("a", 3).id());
    assertThat(r.error()).contains("still broken");
    assertThat(handled).containsExactly(change("a", 1).id(), change("a", 2).id());
    assertThat(store.listKey("orders", "a")).extracting(p -> p.event().id())
        .containsExactly(change("a", 3).id(), change("a", 4).id());
    assertThat(store.listKey("orders", "b")).hasSize(1);

    DeadLetters.ReplayResult all = dlq.replayAll("orders", 100, (event, f) -> handled.add(event.id()), fence);
    assertThat(all.complete()).isTrue();
    assertThat(all.replayed()).isEqualTo(3);
    assertThat(count("orders")).isZero();
    assertThat(handled).endsWith(change("a", 3).id(), change("a", 4).id(), change("b", 1).id());
  }

  @Test
  void discardRemovesWithoutProcessing() {
    store.park(new ParkedChange<>(change("a", 1), 0, "boom", 3, Instant.now(), 7));
    store.park(new ParkedChange<>(change("a", 2), 0, "behind", 0, Instant.now(), 7));
    store.park(new ParkedChange<>(change("b", 1), 0, "boom", 3, Instant.now(), 7));
    DeadLetters<BsonDocument> dlq = DeadLetters.of(store);
    assertThat(dlq.discard("orders", change("b", 1).id())).isTrue();
    assertThat(dlq.discard("orders", change("b", 1).id())).isFalse();
    assertThat(dlq.discardKey("orders", "a")).isEqualTo(2);
    assertThat(count("orders")).isZero();
  }

  /**
   * A change of key {@code key}, version {@code v}, with nanosecond times and a raw event: an
   * update read with updateLookup, so its document is labelled CURRENT and it carries the fields
   * it set; a replayed dead letter must publish from those, never from the lookup.
   */
  protected static ChangeEvent<BsonDocument> change(String key, int v) {
    Instant t = Instant.parse("2026-01-01T00:00:00.123456789Z").plusSeconds(v);
    return new ChangeEvent<>(
        "orders:" + key + ":" + v,
        "orders",
        new Position("{\"_data\": \"82" + key + v + "\"}", t),
        Operation.UPDATE,
        key,
        new BsonDocument("_id", new BsonString(key)),
        new BsonDocument("_id", new BsonString(key)).append("v", new BsonInt32(v)),
        t,
        new BsonDocument("operationType", new BsonString("update")),
        DocumentState.CURRENT,
        new BsonDocument("v", new BsonInt32(v)),
        // A pre-image: it must come back from the store too.
        new BsonDocument("_id", new BsonString(key)).append("v", new BsonInt32(v - 1)));
  }
}
