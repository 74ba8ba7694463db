package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;
import java.util.List;
import java.util.Set;

/**
 * A memory database corrected where Sluice depends on what a real server does:
 *
 * <ul>
 *   <li>the collection option change streams depend on, {@code changeStreamPreAndPostImages}
 *       (MongoDB 6.0+), set with {@code collMod} or at {@code create} and reported by
 *       {@code listCollections} (the stock server rejects {@code collMod} and reports no options).
 *       Which collections have it is shared with {@link FaithfulOplog}, which records post-images
 *       only for those;
 *   <li>{@code find} on {@code local.oplog.rs} sorted by {@code $natural} returns entries in oplog
 *       order, forwards or backwards (the stock server honours only a sort by {@code ts}, which on
 *       a real server scans the whole oplog). The test kit's oplog stores entries in {@code ts}
 *       order, so the two orders are the same here.
 * </ul>
 */
final class FaithfulDatabase extends MemoryDatabase {
  private static final String OPTION = "changeStreamPreAndPostImages";
  private final Set<String> withImages;

  FaithfulDatabase(String name, CursorRegistry cursors, Set<String> withImages) {
    super(name, cursors);
    this.withImages = withImages;
  }

  @Override
  public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
    if (command.equalsIgnoreCase("collMod")) {
      String collection = String.valueOf(query.get(command));
      if (resolveCollection(collection, false) == null) {
        throw new MongoServerError(26, "NamespaceNotFound", "ns does not exist: " + getDatabaseName() + "." + collection);
      }
      record(collection, query.get(OPTION));
      return new Document("ok", 1.0);
    }
    if (command.equalsIgnoreCase("create") && query.get(OPTION) != null) {
      Document plain = new Document(query);
      Object option = plain.remove(OPTION);
      Document response = super.handleCommand(channel, command, plain, resolver, oplog);
      record(String.valueOf(query.get(command)), option);
      return response;
    }
    if (command.equalsIgnoreCase("find") && "local".equals(getDatabaseName()) && "oplog.rs".equals(query.get(command))
        && query.get("sort") instanceof Document sort && sort.get("$natural") instanceof Number direction) {
      Document inOplogOrder = new Document(query);
      inOplogOrder.put("sort", new Document("ts", direction.intValue() < 0 ? -1 : 1));
      return super.handleCommand(channel, command, inOplogOrder, resolver, oplog);
    }
    Document response = super.handleCommand(channel, command, query, resolver, oplog);
    if (command.equalsIgnoreCase("listCollections") && response.get("cursor") instanceof Document cursor
        && cursor.get("firstBatch") instanceof List<?> batch) {
      for (Object o : batch) {
        if (o instanceof Document d && withImages.contains(getDatabaseName() + "." + d.get("name"))
            && d.get("options") instanceof Document options) {
          options.put(OPTION, new Document("enabled", true));
        }
      }
    }
    return response;
  }

  private void record(String collection, Object option) {
    if (!(option instanceof Document d) || !(d.get("enabled") instanceof Boolean enabled)) {
      throw new MongoServerError(9, "FailedToParse", OPTION + " must be {enabled: <bool>}");
    }
    String ns = getDatabaseName() + "." + collection;
    if (enabled) {
      withImages.add(ns);
    } else {
      withImages.remove(ns);
    }
  }
}
