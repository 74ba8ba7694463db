package dev.sluice.mongodb.internal;

import com.mongodb.MongoException;
import com.mongodb.client.MongoDatabase;
import dev.sluice.SluiceException;
import java.time.Instant;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * Reads the database server's wall clock. Every lease expiry is judged by this clock, never by a
 * process clock (see {@code docs/adr/0011-mongodb-lease-clock.md}).
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
