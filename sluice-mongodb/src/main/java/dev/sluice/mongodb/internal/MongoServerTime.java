package dev.sluice.mongodb.internal;

import com.mongodb.MongoException;
import com.mongodb.client.MongoDatabase;
import dev.sluice.SluiceException;
import java.time.Instant;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * Reads the wall clock of the server that answers {@code hello}: on a sharded cluster the mongos
 * router's. No lease decision uses it (the lease store judges on the shard's {@code $currentDate}
 * stamps, {@code docs/adr/0083-mongodb-lease-decisions-on-the-shards-stamp.md}).
 *
 * <p>Reads {@code localTime} from {@link MongoHello}: {@code hello}, which needs no privileges and
 * which the Stable API allows in strict mode ({@code isMaster} is refused there); {@code isMaster}
 * only on servers that do not know {@code hello}.
 */
public final class MongoServerTime {

  private MongoServerTime() {}

  /** The server's current time, millisecond precision. */
  public static Instant now(MongoDatabase database) {
    BsonDocument reply;
    try {
      reply = MongoHello.reply(database);
    } catch (MongoException e) {
      throw new SluiceException(
          "Cannot read the MongoDB server clock (hello on database '"
              + database.getName()
              + "'): "
              + e.getMessage(),
          e);
    }
    BsonValue localTime = reply.get("localTime");
    if (localTime == null || !localTime.isDateTime()) {
      throw new SluiceException(
          "MongoDB server did not report its clock: hello reply has no localTime date: "
              + reply.toJson());
    }
    return Instant.ofEpochMilli(((BsonDateTime) localTime).getValue());
  }
}
