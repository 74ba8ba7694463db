package dev.sluice.mongodb.listener;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import dev.sluice.feed.ChangeEvent;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;

/**
 * Counts, at the driver, the change streams opened on one collection: the {@code aggregate}
 * commands whose pipeline starts with {@code $changeStream} (the lease store watches its own
 * collection and is not counted).
 */
final class StreamCounter implements CommandListener {
  private final String collection;
  private final AtomicInteger opened = new AtomicInteger();

  StreamCounter(String collection) {
    this.collection = collection;
  }

  /** A client on {@code connectionString} whose commands this counter sees; the caller closes it. */
  MongoClient client(String connectionString) {
    return MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(connectionString))
        .addCommandListener(this)
        .build());
  }

  int opened() {
    return opened.get();
  }

  @Override
  public void commandStarted(CommandStartedEvent event) {
    BsonDocument cmd = event.getCommand();
    if (event.getCommandName().equals("aggregate") && cmd.isString("aggregate")
        && cmd.getString("aggregate").getValue().equals(collection) && cmd.isArray("pipeline")
        && !cmd.getArray("pipeline").isEmpty()
        && cmd.getArray("pipeline").get(0).asDocument().containsKey("$changeStream")) {
      opened.incrementAndGet();
    }
  }

  /**
   * The value of field {@code n} this change wrote: an update's changed fields (its looked-up
   * document is the document as it is when read, possibly after later updates), else its document.
   */
  static int written(ChangeEvent<BsonDocument> change) {
    return (change.changedFields() != null ? change.changedFields() : change.document()).getInt32("n").getValue();
  }
}
