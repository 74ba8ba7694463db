package dev.sluice.mongodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.MongoOperationTimeoutException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Updates;
import dev.sluice.listener.Fence;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.sequenced.SequencedValue;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Issue 11 item 7, beyond the lease store: the dead-letter store, the inbox, fenced writes and
 * sequenced values never wait without a bound for a server that stopped answering (a hung
 * primary, majority write concern without a reachable majority). The client has the driver's
 * defaults (no socket read timeout, no timeoutMS), as applications often do; before, each of these
 * calls waited forever. Needs the embedded server's stall control, so it starts its own even under
 * {@code -Dsluice.mongodb.uri}.
 */
class EveryStoreCallIsBoundedTest {

  @Test
  void everyStoreCallEndsWithinTheTimeoutOfTheHandleItWasGiven() {
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient client = driverDefaults(server)) {
      MongoDatabase db = client.getDatabase("shop").withTimeout(500, TimeUnit.MILLISECONDS);
      MongoDeadLetterStore deadLetters = MongoDeadLetterStore.create(db, "dead_letters");
      MongoInbox inbox = MongoInbox.create(db, "inbox");
      SequencedValue prices = SequencedValue.of(db.getCollection("prices", BsonDocument.class), "price");
      Map<String, Executable> calls = new LinkedHashMap<>();
      calls.put("dead letters: hasParked", () -> deadLetters.hasParked("orders", 0, "k1"));
      calls.put("inbox: processed", () -> inbox.processed("m1"));
      calls.put("fenced write", () -> FencedWrites.updateOne(db.getCollection("stock"), "sku1",
          Updates.set("count", 1), new Fence("orders#0of1", "n1", 7)));
      calls.put("sequenced value: get", () -> prices.get(new BsonString("sku1")));

      server.stall(true);
      calls.forEach((what, call) -> assertTimeoutPreemptively(Duration.ofSeconds(5),
          () -> assertThat(catchThrowable(call::execute)).as(what).isNotNull()
              .satisfies(e -> assertThat(causes(e)).as("%s fails with the driver's operation timeout: %s", what, e)
                  .anyMatch(c -> c instanceof MongoOperationTimeoutException)),
          what + " waited for a server that does not answer"));
    }
  }

  @Test
  void aHandleWithoutATimeoutGetsTheDefaultBound() {
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient client = driverDefaults(server)) {
      MongoInbox inbox = MongoInbox.create(client.getDatabase("shop"), "inbox");
      server.stall(true);
      assertTimeoutPreemptively(MongoReads.DEFAULT_TIMEOUT.plusSeconds(10), () ->
          assertThat(causes(catchThrowable(() -> inbox.processed("m1"))))
              .anyMatch(c -> c instanceof MongoOperationTimeoutException),
          "an inbox on a handle without timeoutMS waited for a server that does not answer");
    }
  }

  /**
   * Issue 34 section 2.2: the check a fenced-write target, a view or a sequenced value makes at
   * start (ADR 0060: can it take upserts by {@code _id}?) is an {@code explain} on the
   * application's handle; on a handle without a timeout it waited for ever for a server that does
   * not answer. It now gives up within the default bound and leaves the decision to the first write.
   */
  @Test
  void theShardKeyCheckAtStartEndsWithinTheDefaultBound() {
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient client = driverDefaults(server)) {
      MongoDatabase db = client.getDatabase("shop");
      server.stall(true);
      assertTimeoutPreemptively(MongoReads.DEFAULT_TIMEOUT.plusSeconds(10),
          () -> FencedWrites.requireTarget(db, "stock"),
          "the shard-key check at start waited for a server that does not answer");
    }
  }

  private static MongoClient driverDefaults(EmbeddedMongo server) {
    return MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(server.connectionString())).build());
  }

  private static java.util.List<Throwable> causes(Throwable e) {
    java.util.List<Throwable> chain = new java.util.ArrayList<>();
    for (Throwable t = e; t != null && !chain.contains(t); t = t.getCause()) {
      chain.add(t);
    }
    return chain;
  }
}
