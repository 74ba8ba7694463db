package dev.sluice.mongodb.internal;

import com.mongodb.MongoCommandException;
import com.mongodb.client.MongoDatabase;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;

/**
 * The server's handshake reply: {@code hello}, the command every supported MongoDB answers and the
 * only one the Stable API allows in strict mode. A server that does not know {@code hello} (error
 * 59, CommandNotFound: MongoDB before 4.4.2, the embedded test server) is asked {@code isMaster}
 * instead, and remembered per database handle so the probe is paid once.
 */
public final class MongoHello {
  private static final BsonDocument HELLO = new BsonDocument("hello", new BsonInt32(1));
  private static final BsonDocument IS_MASTER = new BsonDocument("isMaster", new BsonInt32(1));
  private static final int COMMAND_NOT_FOUND = 59;
  private static final Map<MongoDatabase, Boolean> WITHOUT_HELLO = Collections.synchronizedMap(new WeakHashMap<>());

  private MongoHello() {}

  /** The reply of {@code hello} (or {@code isMaster} where {@code hello} is unknown). */
  public static BsonDocument reply(MongoDatabase database) {
    if (!WITHOUT_HELLO.containsKey(database)) {
      try {
        return database.runCommand(HELLO, BsonDocument.class);
      } catch (MongoCommandException e) {
        if (e.getErrorCode() != COMMAND_NOT_FOUND) {
          throw e;
        }
        WITHOUT_HELLO.put(database, Boolean.TRUE);
      }
    }
    return database.runCommand(IS_MASTER, BsonDocument.class);
  }

  /** Whether the reply is a mongos router's ({@code msg: "isdbgrid"}). */
  public static boolean isMongos(BsonDocument reply) {
    return reply.get("msg") instanceof BsonString msg && "isdbgrid".equals(msg.getValue());
  }
}
