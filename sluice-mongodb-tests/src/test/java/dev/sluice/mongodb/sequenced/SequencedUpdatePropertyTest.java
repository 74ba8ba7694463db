package dev.sluice.mongodb.sequenced;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonValue;

/**
 * Random operation histories, delivered in a random order with random duplicates to 1..8
 * consumers running at once against the server: the result must equal applying the history
 * sequentially in sequence order.
 */
class SequencedUpdatePropertyTest {
  private static InMemoryMongo mongo;
  private static MongoCollection<BsonDocument> collection;
  private static final AtomicInteger DOC_IDS = new AtomicInteger();

  /** One operation of a history: document (0..1), member (0..4), add or remove, sequence number. */
  record Op(int doc, String member, boolean add, long seq) {}

  /** A history and the order in which its operations (and some duplicates) are delivered. */
  record Scenario(List<Op> history, List<Op> delivery) {}

  @BeforeContainer
  static void start() {
    mongo = new InMemoryMongo();
    collection = mongo.freshDatabase().getCollection("docs", BsonDocument.class);
  }

  @AfterContainer
  static void stop() {
    mongo.close();
  }

  @Provide
  Arbitrary<Scenario> scenarios() {
    Arbitrary<List<Op>> histories =
        Combinators.combine(
                Arbitraries.integers().between(0, 1),
                Arbitraries.integers().between(0, 4),
                Arbitraries.of(true, false),
                Arbitraries.integers().between(1, 3))
            .as((doc, member, add, gap) -> new Op(doc, "m" + member, add, gap))
            .list()
            .ofMinSize(1)
            .ofMaxSize(40)
            .map(SequencedUpdatePropertyTest::assignIncreasingSequences);
    return histories.flatMap(
        history ->
            Arbitraries.integers()
                .between(0, history.size() - 1)
                .list()
                .ofMaxSize(history.size())
                .flatMap(
                    dupIndexes -> {
                      List<Op> all = new ArrayList<>(history);
                      dupIndexes.forEach(i -> all.add(history.get(i)));
                      return Arbitraries.shuffle(all).map(d -> new Scenario(history, d));
                    }));
  }

  // Sequence numbers strictly increase with gaps, as a producer stamping messages would make them.
  private static List<Op> assignIncreasingSequences(List<Op> raw) {
    List<Op> ops = new ArrayList<>();
    long seq = 0;
    for (Op op : raw) {
      seq += op.seq();
      ops.add(new Op(op.doc(), op.member(), op.add(), seq));
    }
    return ops;
  }

  @Property(tries = 60)
  void setEqualsSequentialApplication(
      @ForAll("scenarios") Scenario scenario, @ForAll @IntRange(min = 1, max = 8) int consumers)
      throws Exception {
    SequencedSet set = SequencedSet.of(collection, "members");
    BsonValue[] ids = freshIds();
    Map<Op, AtomicInteger> applied = new ConcurrentHashMap<>();

    runConsumers(
        scenario.delivery(),
        consumers,
        op -> {
          Outcome outcome =
              op.add()
                  ? set.add(ids[op.doc()], op.member(), op.seq())
                  : set.remove(ids[op.doc()], op.member(), op.seq());
          if (outcome == Outcome.APPLIED) {
            applied.computeIfAbsent(op, k -> new AtomicInteger()).incrementAndGet();
          }
        });

    for (int doc = 0; doc < 2; doc++) {
      assertThat(set.members(ids[doc]))
          .as("doc %d after %s", doc, scenario.delivery())
          .isEqualTo(sequentialMembers(scenario.history(), doc));
    }
    // A duplicate is never applied twice, and the last operation of every member always is.
    assertThat(applied.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
    lastPerMember(scenario.history()).values().forEach(op -> assertThat(applied).containsKey(op));
  }

  @Property(tries = 40)
  void scalarEqualsTheValueOfTheHighestSequence(
      @ForAll("scenarios") Scenario scenario, @ForAll @IntRange(min = 1, max = 8) int consumers)
      throws Exception {
    SequencedValue value = SequencedValue.of(collection, "value");
    BsonValue[] ids = freshIds();
    // The op's member and flag stand for the value written.
    runConsumers(
        scenario.delivery(),
        consumers,
        op -> value.set(ids[op.doc()], new BsonString(op.member() + op.add()), op.seq()));

    for (int doc = 0; doc < 2; doc++) {
      final int d = doc;
      Op last =
          scenario.history().stream().filter(op -> op.doc() == d).reduce((a, b) -> b).orElse(null);
      if (last == null) {
        assertThat(value.get(ids[doc])).isEmpty();
      } else {
        assertThat(value.get(ids[doc])).contains(new BsonString(last.member() + last.add()));
        assertThat(value.sequence(ids[doc])).contains(last.seq());
      }
    }
  }

  private static BsonValue[] freshIds() {
    return new BsonValue[] {
      new BsonInt32(DOC_IDS.incrementAndGet()), new BsonInt32(DOC_IDS.incrementAndGet())
    };
  }

  private interface Consumer {
    void accept(Op op) throws Exception;
  }

  private static void runConsumers(List<Op> delivery, int consumers, Consumer consumer)
      throws Exception {
    ConcurrentLinkedQueue<Op> queue = new ConcurrentLinkedQueue<>(delivery);
    ExecutorService pool = Executors.newFixedThreadPool(consumers);
    CountDownLatch go = new CountDownLatch(1);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int i = 0; i < consumers; i++) {
        futures.add(
            pool.submit(
                () -> {
                  go.await();
                  for (Op op = queue.poll(); op != null; op = queue.poll()) {
                    consumer.accept(op);
                  }
                  return null;
                }));
      }
      go.countDown();
      for (Future<?> f : futures) {
        f.get(30, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static Map<String, Op> lastPerMember(List<Op> history) {
    Map<String, Op> last = new HashMap<>();
    for (Op op : history) {
      last.put(op.doc() + "/" + op.member(), op);
    }
    return last;
  }

  private static Set<String> sequentialMembers(List<Op> history, int doc) {
    Set<String> members = new TreeSet<>();
    for (Op op : history) {
      if (op.doc() == doc) {
        if (op.add()) {
          members.add(op.member());
        } else {
          members.remove(op.member());
        }
      }
    }
    return members;
  }
}
