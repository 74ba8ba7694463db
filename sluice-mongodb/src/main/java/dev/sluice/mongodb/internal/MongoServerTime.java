package dev.sluice.mongodb.internal;

import com.mongodb.MongoException;
import com.mongodb.client.MongoDatabase;
import dev.sluice.SluiceException;
import java.time.Instant;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonValue;

/**
 * Reads the database server's wall clock. Every lease expiry is judged by this clock, never by a
 * process clock (see {@code docs/adr/0011-mongodb-lease-clock.md}).
 *
 * <p>Uses {@code isMaster}: real MongoDB (every version still answers it, and it needs no
 * privileges) and the embedded server both report {@code localTime} there. {@code hello} would be
 * the modern name, but the embedded server does not know it; {@code isMaster} answers the same.
 */
public final class MongoServerTime {

  private static final BsonDocument IS_MASTER = new BsonDocument("isMaster", new BsonInt32(1));

  private MongoServerTime() {}

  /** The server's current time, millisecond precision. */
  public static Instant now(MongoDatabase database) {
    BsonDocument reply;
    try {
      reply = database.runCommand(IS_MASTER, BsonDocument.class);
    } catch (MongoException e) {
      throw new SluiceException(
          "Cannot read the MongoDB server clock (isMaster on database '"
              + database.getName()
              + "'): "
              + e.getMessage(),
          e);
    }
    BsonValue localTime = reply.get("localTime");
    if (localTime == null || !localTime.isDateTime()) {
      throw new SluiceException(
          "MongoDB server did not report its clock: isMaster reply has no localTime date: "
              + reply.toJson());
    }
    return Instant.ofEpochMilli(((BsonDateTime) localTime).getValue());
  }
}
