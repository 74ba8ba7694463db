package dev.sluice.mongodb.internal;

import com.mongodb.MongoException;
import com.mongodb.MongoNamespace;
import com.mongodb.MongoServerException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import java.util.List;
import java.util.function.Supplier;
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sluice's writes into application collections (fenced writes, sequenced values, view targets)
 * are conditional upserts that identify a document by {@code _id} alone. A sharded collection whose
 * shard key is not {@code _id} cannot route such an upsert: the server refuses it with error 61,
 * ShardKeyNotFound. That refusal is a configuration error, not a transient one: this turns it into
 * a {@link ConfigurationException} naming the collection and what to do, and refuses such a target
 * at start where a database handle allows asking (ADR 0060).
 */
public final class ShardedTargets {
  private static final Logger log = LoggerFactory.getLogger(ShardedTargets.class);
  /** ShardKeyNotFound: mongos cannot extract the shard key from an upsert's filter. */
  public static final int SHARD_KEY_NOT_FOUND = 61;

  private ShardedTargets() {}

  /** Runs an upsert into {@code target}; a refusal for want of a shard key becomes a clear error. */
  public static <T> T upsert(MongoCollection<?> target, Supplier<T> write) {
    try {
      return write.get();
    } catch (MongoServerException e) {
      if (e.getCode() == SHARD_KEY_NOT_FOUND) {
        throw refused(target.getNamespace(), e.getMessage());
      }
      throw e;
    }
  }

  /**
   * Refuses, before any change is processed, a target collection that cannot take upserts by
   * {@code _id}: asks the server to explain (not run) such an upsert, which routes it as the
   * write would be routed and so fails with error 61 on a collection sharded on another key. A
   * server that cannot explain it (the embedded test server, missing privileges) leaves the
   * decision to the first write, which {@link #upsert} makes just as clear.
   */
  public static void requireUpsertsById(MongoDatabase database, String collection) {
    BsonDocument probe = new BsonDocument("update", new BsonString(collection))
        .append("updates", new BsonArray(List.of(new BsonDocument("q",
                new BsonDocument("_id", new BsonString("sluice shard-key probe")))
            .append("u", new BsonDocument("$set", new BsonDocument("sluiceProbe", new BsonInt32(1))))
            .append("upsert", BsonBoolean.TRUE))));
    // Bounded as every store call is (MongoReads): an application's handle without timeoutMS would
    // otherwise hold the start of a listener for ever on a server that does not answer.
    MongoDatabase bounded = database.getTimeout(java.util.concurrent.TimeUnit.MILLISECONDS) == null
        ? database.withTimeout(MongoReads.DEFAULT_TIMEOUT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS)
        : database;
    try {
      bounded.runCommand(new BsonDocument("explain", probe).append("verbosity", new BsonString("queryPlanner")));
    } catch (MongoServerException e) {
      if (e.getCode() == SHARD_KEY_NOT_FOUND) {
        throw refused(new MongoNamespace(database.getName(), collection), e.getMessage());
      }
      log.debug("Cannot ask whether {}.{} takes upserts by _id ({}); the first write will tell",
          database.getName(), collection, e.getMessage());
    } catch (MongoException e) {
      log.debug("Cannot ask whether {}.{} takes upserts by _id ({}); the first write will tell",
          database.getName(), collection, e.getMessage());
    }
  }

  private static ConfigurationException refused(MongoNamespace target, String serverMessage) {
    return new ConfigurationException("Collection '" + target + "' is sharded on a key other than _id, and"
        + " Sluice writes its documents with upserts that identify them by _id alone, which the cluster"
        + " cannot route (server: " + serverMessage + "). Shard it on {_id: 1} or {_id: \"hashed\"},"
        + " or keep it unsharded; nothing was written.");
  }
}
