package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.process.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The listener's guarantees on the embedded MongoDB: resume after a clean stop and after SIGKILL
 * of the listener JVM, both bootstrap races of seed 000 (figures 4a and 4b), and a lost lease
 * stopping delivery within one renew interval. Figure 3 (SIGSTOP) is {@code DemoTest} in
 * sluice-demo, which runs it with three listener JVMs.
 */
class ListenerOnMongoTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final List<ChildJvm> children = new ArrayList<>();
  private final List<Listener<?>> listeners = new ArrayList<>();
  private final String db = "listener" + DATABASES.incrementAndGet();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
    children.forEach(ChildJvm::close);
  }

  private MongoDatabase database() {
    return MONGO.client().getDatabase(db);
  }

  /**
   * Inserts changes {@code from} to {@code to} in one ordered insertMany: one insert event each, in
   * this order, as from one insertOne each, without a round trip each (hundreds of them were
   * seconds of a test on a busy machine).
   */
  private void write(int from, int to) {
    List<Document> documents = new ArrayList<>();
    for (int i = from; i < to; i++) {
      documents.add(new Document("_id", "o" + i).append("changeNo", i));
    }
    database().getCollection("orders").insertMany(documents);
  }

  private ChildJvm node(String name, long leaseMillis, int checkpointEvery, String bootstrap) {
    ChildJvm c = ChildJvm.start(name, RecordingNode.class, MONGO.connectionString(), db, "orders", name,
        Long.toString(leaseMillis), Integer.toString(checkpointEvery), bootstrap);
    children.add(c);
    return c;
  }

  private Set<Integer> delivered() {
    return database().getCollection("deliveries").distinct("changeNo", Integer.class).into(new HashSet<>());
  }


  private static Set<Integer> range(int from, int to) {
    Set<Integer> s = new HashSet<>();
    for (int i = from; i < to; i++) {
      s.add(i);
    }
    return s;
  }

  @Test
  void afterSigkillOfTheListenerJvmNothingIsLostAndRedeliveryIsBoundedByTheBatch() {
    int batch = 20;
    write(0, 600);
    ChildJvm first = node("first", 2000, batch, "oldest");
    first.awaitLine(l -> l.startsWith("DELIVERED 300"), Duration.ofSeconds(60));
    first.kill();
    write(600, 800);

    ChildJvm second = node("second", 2000, batch, "oldest");
    second.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    await().atMost(Duration.ofSeconds(60)).until(() -> delivered().size() == 800);

    assertThat(delivered()).isEqualTo(range(0, 800));
    // Redelivered = what the killed JVM processed after its last commit: a contiguous suffix of
    // its deliveries, at most one checkpoint batch. (Counting its COMMITTED lines would race with
    // the kill, which can land between a commit and its log line.)
    java.util.Map<Integer, Integer> counts = new java.util.HashMap<>();
    int lastByFirst = -1;
    for (Document d : database().getCollection("deliveries").find()) {
      int n = d.getInteger("changeNo");
      counts.merge(n, 1, Integer::sum);
      if (d.getString("node").equals("first")) {
        lastByFirst = Math.max(lastByFirst, n);
      }
    }
    Set<Integer> redelivered = new java.util.TreeSet<>();
    counts.forEach((n, c) -> {
      assertThat(c).as("change %d delivered at most twice", n).isLessThanOrEqualTo(2);
      if (c == 2) {
        redelivered.add(n);
      }
    });
    assertThat(redelivered.size()).as("redelivered after the crash").isLessThanOrEqualTo(batch);
    assertThat(redelivered).isEqualTo(range(lastByFirst - redelivered.size() + 1, lastByFirst + 1));
  }

  private Listener<BsonDocument> listener(String owner, List<Integer> sink, CheckpointPolicy checkpoint,
      BootstrapPolicy bootstrap, ListenerObserver observer) {
    Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(MONGO.client(), db, "orders").build(),
            MongoLeaseStore.builder(database()).build()).group("test-group")
        .owner(owner)
        .leaseDuration(Duration.ofSeconds(2))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(checkpoint)
        .bootstrap(bootstrap)
        .observer(observer)
        .handler((change, fence) -> sink.add(change.document().getInt32("changeNo").getValue()))
        .build();
    listeners.add(l);
    return l.start();
  }

  @Test
  void afterACleanStopTheNextListenerResumesExactlyAfterTheCheckpoint() {
    write(0, 100);
    List<Integer> first = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> l1 = listener("a", first, CheckpointPolicy.every(30, Duration.ofHours(1)),
        BootstrapPolicy.oldest(), ListenerObserver.NOOP);
    await().atMost(Duration.ofSeconds(30)).until(() -> first.size() == 100);
    l1.close();
    write(100, 150);

    List<Integer> second = new CopyOnWriteArrayList<>();
    listener("b", second, CheckpointPolicy.everyChange(), BootstrapPolicy.oldest(), ListenerObserver.NOOP);
    await().atMost(Duration.ofSeconds(30)).until(() -> second.size() >= 50);

    assertThat(first).containsExactlyElementsOf(new ArrayList<>(new java.util.TreeSet<>(range(0, 100))));
    assertThat(second).as("in order, no duplicates after a clean stop")
        .containsExactlyElementsOf(new ArrayList<>(new java.util.TreeSet<>(range(100, 150))));
  }

  @Test
  void twoJvmsGivenTheSameOwnerLabelNeverHoldThePartitionTogetherNorTradeIt() {
    ChildJvm one = node("svc", 2000, 1, "oldest");
    one.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    ChildJvm two = node("svc", 2000, 1, "oldest");
    two.awaitLineStartingWith("READY", Duration.ofSeconds(30));
    LeaseStore leases = MongoLeaseStore.builder(database()).build();
    String lease = "recorder/" + db + ".orders#0of1";
    LeaseRecord held = leases.read(lease).orElseThrow();
    write(0, 100);
    await().atMost(Duration.ofSeconds(30)).until(() -> delivered().size() == 100);
    // Several renew and acquire intervals (lease 2 s): the label is not the identity, so the
    // second JVM neither joins the holder nor takes the lease over.
    await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(5))
        .until(() -> leases.read(lease).orElseThrow().epoch() == held.epoch());
    assertThat(held.owner()).startsWith("svc/");
    assertThat(database().getCollection("deliveries").distinct("epoch", Long.class).into(new HashSet<>()))
        .containsExactly(held.epoch());
    assertThat(two.output()).noneMatch(l -> l.startsWith("ACQUIRED"));
  }

  @Test
  void figure4aWritesMadeBeforeTheFirstListenerStartedAreDelivered() {
    write(0, 25); // before any listener ever ran
    List<Integer> seen = new CopyOnWriteArrayList<>();
    listener("a", seen, CheckpointPolicy.everyChange(), BootstrapPolicy.oldest(), ListenerObserver.NOOP);
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.size() >= 25);
    assertThat(seen).containsExactlyElementsOf(new ArrayList<>(new java.util.TreeSet<>(range(0, 25))));
  }

  @Test
  void figure4bACrashBeforeTheFirstChangeDoesNotMoveTheStartPoint() {
    write(0, 5); // before the first start; "latest" deliberately skips these
    ChildJvm first = node("first", 2000, 1, "latest");
    first.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    // The bootstrap point is pinned as the first checkpoint before anything is delivered.
    await().atMost(Duration.ofSeconds(10)).until(() -> MongoLeaseStore.builder(database()).build()
        .read("recorder/" + db + ".orders#0of1").map(r -> r.checkpoint() != null).orElse(false));
    first.kill(); // crashes before processing anything
    write(5, 15); // figure 4b: written while no listener runs

    ChildJvm second = node("second", 2000, 1, "latest");
    second.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    await().atMost(Duration.ofSeconds(30)).until(() -> delivered().size() >= 10);
    assertThat(delivered()).isEqualTo(range(5, 15));
  }

  @Test
  void aLostLeaseStopsDeliveryWithinOneRenewInterval() {
    List<Integer> seen = new CopyOnWriteArrayList<>();
    CountDownLatch lost = new CountDownLatch(1);
    Listener<BsonDocument> l = listener("victim", seen, CheckpointPolicy.everyChange(), BootstrapPolicy.oldest(),
        new ListenerObserver() {
          @Override
          public void lost(String lease, long epoch, String reason) {
            lost.countDown();
          }
        });
    write(0, 10);
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.size() == 10);

    // Another process takes the lease over (as after this one paused): a new owner and epoch, and
    // an expiry it keeps renewing (five minutes here). Left at the victim's expiry, the thief's
    // lease would run out within the 2 s lease and the victim would rightly take it back.
    String leaseName = "test-group/" + db + ".orders#0of1";
    long stolenAt = System.nanoTime();
    database().getCollection(MongoLeaseStore.DEFAULT_COLLECTION).updateOne(Filters.eq("_id", leaseName),
        Updates.combine(Updates.set("owner", "thief"), Updates.inc("epoch", 1L),
            Updates.set("expiresAt", new java.util.Date(System.currentTimeMillis() + 300_000))));
    await().atMost(Duration.ofSeconds(5)).until(() -> lost.getCount() == 0);
    long detectMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stolenAt);
    Duration renew = l.config().renewInterval();
    int seenAtLoss = seen.size();
    write(10, 20);

    assertThat(detectMillis).as("renew interval is %s", renew).isLessThanOrEqualTo(renew.toMillis() + 500);
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(3)).until(() -> seen.size() == seenAtLoss);
    LeaseStore store = MongoLeaseStore.builder(database()).build();
    LeaseRecord record = store.read(leaseName).orElseThrow();
    assertThat(record.owner()).isEqualTo("thief");
  }

  private Listener<BsonDocument> member(String owner, int partitions, List<Integer> sink) {
    Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(MONGO.client(), db, "orders").build(),
            MongoLeaseStore.builder(database()).build()).group("balance-group")
        .owner(owner)
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(2))
        .renewInterval(Duration.ofMillis(500))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .handler((change, fence) -> sink.add(change.document().getInt32("changeNo").getValue()))
        .build();
    listeners.add(l);
    return l.start();
  }

  private static long active(Listener<?> l) {
    return l.status().stream().filter(s -> s.state() == dev.sluice.listener.PartitionState.ACTIVE).count();
  }

  @Test
  void fourPartitionsOnThreeMembersStartedOneAfterAnotherEndTwoOneOneAndAClosedMemberLeavesNoRecord() {
    List<Integer> seen = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> a = member("a", 4, seen);
    await().atMost(Duration.ofSeconds(30)).until(() -> active(a) == 4);
    Listener<BsonDocument> b = member("b", 4, seen);
    await().atMost(Duration.ofSeconds(30)).until(() -> active(a) == 2 && active(b) == 2);
    Listener<BsonDocument> c = member("c", 4, seen);
    await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(40))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1);
    write(0, 40);
    await().atMost(Duration.ofSeconds(30)).until(() -> new HashSet<>(seen).equals(range(0, 40)));

    LeaseStore store = MongoLeaseStore.builder(database()).build();
    String memberPrefix = c.config().memberPrefix();
    c.close();
    await().atMost(Duration.ofSeconds(30)).until(() -> active(a) == 2 && active(b) == 2);
    assertThat(store.list(memberPrefix)).extracting(LeaseRecord::name)
        .containsExactlyInAnyOrder(memberPrefix + a.owner(), memberPrefix + b.owner());
  }
}
