package dev.sluice.mongodb.fence;

import com.mongodb.MongoNamespace;
import com.mongodb.MongoWriteException;
import com.mongodb.ServerAddress;
import com.mongodb.WriteError;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.result.UpdateResult;
import java.lang.reflect.Proxy;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.function.Supplier;
import org.bson.BsonDocument;
import org.bson.BsonString;

/**
 * A FAKE collection for the one interleaving the embedded server cannot produce (it serializes
 * commands): two conditional upserts that both miss and both insert, the loser getting E11000.
 * Each {@code updateOne} call takes the next scripted outcome. Nothing else is supported.
 */
final class FakeUpsertRaceCollection {

  private FakeUpsertRaceCollection() {}

  static final Supplier<UpdateResult> DUPLICATE_KEY =
      () -> {
        throw new MongoWriteException(
            new WriteError(11000, "E11000 duplicate key error (fake)", new BsonDocument()),
            new ServerAddress("fake-replica", 27017),
            java.util.Set.of());
      };

  static Supplier<UpdateResult> matched() {
    return () -> UpdateResult.acknowledged(1, 1L, null);
  }

  @SuppressWarnings("unchecked")
  static MongoCollection<BsonDocument> scripted(Deque<Supplier<UpdateResult>> outcomes, int[] calls) {
    return (MongoCollection<BsonDocument>)
        Proxy.newProxyInstance(
            FakeUpsertRaceCollection.class.getClassLoader(),
            new Class<?>[] {MongoCollection.class},
            (proxy, method, args) -> {
              switch (method.getName()) {
                case "updateOne":
                  calls[0]++;
                  Supplier<UpdateResult> next = outcomes.poll();
                  if (next == null) {
                    throw new AssertionError("more updateOne calls than scripted");
                  }
                  return next.get();
                case "getNamespace":
                  return new MongoNamespace("fake", "view");
                case "getTimeout":
                  return 10_000L; // a bounded handle: FencedWrites keeps it as it is
                case "withTimeout":
                  return proxy;
                case "toString":
                  return "FakeUpsertRaceCollection";
                default:
                  throw new UnsupportedOperationException(method.getName());
              }
            });
  }

  @SafeVarargs
  static Deque<Supplier<UpdateResult>> script(Supplier<UpdateResult>... outcomes) {
    Deque<Supplier<UpdateResult>> d = new ArrayDeque<>();
    for (Supplier<UpdateResult> o : outcomes) {
      d.add(o);
    }
    return d;
  }

  static BsonString id() {
    return new BsonString("k");
  }
}
