package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.DefaultQueryMatcher;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import de.bwaldvogel.mongo.backend.Utils;
import io.netty.channel.Channel;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;

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
 *       a real server scans the whole oplog). The test kit's oplog keeps its entries in {@code ts}
 *       order, so the two orders are the same here. With a limit (the oldest or newest entries,
 *       filtered or not) the entries are read from that end until the limit is reached, as a real
 *       server does, not by sorting the oplog;
 *   <li>a write and its oplog entry become visible together, and a read never sees a write half
 *       done: {@link TrimmableMemoryBackend#handleCommand} runs writes under a write lock and reads
 *       under a read lock;
 *   <li>{@code $type} in a {@code find} filter may name the deprecated types undefined (6) and
 *       symbol (14), as a real server allows; the stock server refuses them, and can store
 *       neither, so they are taken out of a {@code $type} list (they would match nothing);
 *   <li>updates by pipeline and {@code $$NOW} read once per command from the server's clock
 *       ({@link PipelineUpdates}); {@link TrimmableMemoryBackend#pipelineUpdates} turns them off to
 *       answer as a server before 4.2 does.
 * </ul>
 */
final class FaithfulDatabase extends MemoryDatabase {
  private static final String OPTION = "changeStreamPreAndPostImages";
  private final Set<String> withImages;
  private final Clock clock;
  /** The {@code $$NOW} of one command: the server clock, or a router's ({@link TrimmableMemoryBackend#routerNow}). */
  private final java.util.function.Supplier<Instant> routerNow;
  private final BooleanSupplier pipelineUpdates;
  private final Map<String, List<String>> shardKeys;

  FaithfulDatabase(String name, CursorRegistry cursors, Set<String> withImages, Clock clock,
      java.util.function.Supplier<Instant> routerNow, BooleanSupplier pipelineUpdates, Map<String, List<String>> shardKeys) {
    super(name, cursors);
    this.withImages = withImages;
    this.clock = clock;
    this.routerNow = routerNow;
    this.pipelineUpdates = pipelineUpdates;
    this.shardKeys = shardKeys;
  }

  @Override
  public Document handleCommand(Channel channel, String command, Document originalQuery, DatabaseResolver resolver, Oplog oplog) {
    Document query = EVALUATES_NOW.contains(command.toLowerCase())
        // BSON dates hold milliseconds: a real server never stores (or compares) a finer instant.
        ? withCurrentDate(command, withNow(command, originalQuery, millis(routerNow.get())), millis(clock.instant()))
        : originalQuery;
    if (!shardKeys.isEmpty()) {
      Document refused = routeUpserts(command, query);
      if (refused != null) {
        return refused;
      }
    }
    if (command.equalsIgnoreCase("update") && query.get("updates") instanceof List<?> updates
        && updates.stream().anyMatch(u -> ((Document) u).get("u") instanceof List)) {
      return pipelineUpdate(query, updates, oplog);
    }
    if (command.equalsIgnoreCase("findAndModify") && query.get("update") instanceof List<?> pipeline) {
      return pipelineFindAndModify(command, query, pipeline, oplog);
    }
    if (command.equalsIgnoreCase("collMod")) {
      String collection = String.valueOf(query.get(command));
      if (resolveCollection(collection, false) == null) {
        throw new MongoServerError(26, "NamespaceNotFound", "ns does not exist: " + getDatabaseName() + "." + collection);
      }
      record(collection, query.get(OPTION));
      if (withImages.contains(getDatabaseName() + "." + collection) && oplog instanceof FaithfulOplog faithful) {
        faithful.imagesEnabled(getDatabaseName() + "." + collection,
            resolveCollection(collection, false).handleQuery(new Document()));
      }
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
        && query.get("sort") instanceof Document sort && sort.size() == 1 && sort.get("$natural") instanceof Number direction
        && query.get("limit") instanceof Number limit && limit.intValue() >= 1 && limit.intValue() <= 101
        && !(query.get("skip") instanceof Number skip && skip.intValue() != 0)
        && inclusionOnly(query.get("projection")) && oplog instanceof FaithfulOplog faithful) {
      // The oldest or newest entries, as a real server reads them: from that end of the oplog until
      // the limit is reached, not by sorting the whole oplog.
      Document filter = query.get("filter") instanceof Document f ? f : new Document();
      DefaultQueryMatcher matcher = new DefaultQueryMatcher(); // not shared: it keeps state between calls
      List<Document> found = new ArrayList<>();
      for (Document entry : faithful.inOrder(direction.intValue() >= 0)) {
        if (found.size() >= limit.intValue()) {
          break;
        }
        if (matcher.matches(entry, filter)) {
          found.add(projected(entry.cloneDeeply(), query.get("projection")));
        }
      }
      return new Document("cursor", new Document("id", 0L).append("ns", "local.oplog.rs")
          .append("firstBatch", found)).append("ok", 1.0);
    }
    if (command.equalsIgnoreCase("find") && "local".equals(getDatabaseName()) && "oplog.rs".equals(query.get(command))
        && query.get("sort") instanceof Document sort && sort.get("$natural") instanceof Number direction) {
      Document inOplogOrder = new Document(query);
      inOplogOrder.put("sort", new Document("ts", direction.intValue() < 0 ? -1 : 1));
      return super.handleCommand(channel, command, inOplogOrder, resolver, oplog);
    }
    if (command.equalsIgnoreCase("find") && query.get("filter") instanceof Document filter) {
      query = new Document(query);
      query.put("filter", withoutDeprecatedTypes(filter));
    }
    Document response = super.handleCommand(channel, command, query, resolver, oplog);
    if (command.equalsIgnoreCase("listCollections") && response.get("cursor") instanceof Document cursor
        && cursor.get("firstBatch") instanceof List<?> batch) {
      for (Object o : batch) {
        if (o instanceof Document d && withImages.contains(getDatabaseName() + "." + d.get("name"))
            && d.get("options") instanceof Document options) {
          options.put(OPTION, new Document("enabled", true));
        }
        if (o instanceof Document d && oplog instanceof FaithfulOplog faithful && !"view".equals(d.get("type"))) {
          // As a real server: each collection's UUID, the identity its resume tokens carry.
          Document info = d.get("info") instanceof Document i ? i : new Document("readOnly", false);
          info.put("uuid", faithful.uuidOf(getDatabaseName() + "." + d.get("name")));
          d.put("info", info);
        }
      }
    }
    return response;
  }

  /**
   * What a mongos does with an upsert into a collection sharded on {@code shardKeys}: it must
   * find every shard-key field as an equality in the filter to route the insert, else error 61
   * (a write error of {@code update}, a command error of {@code findAndModify} and of
   * {@code explain}). An explained update that can be routed is answered with an empty plan.
   *
   * @return the reply to send instead of running the command, or null to run it
   */
  private Document routeUpserts(String command, Document query) {
    switch (command.toLowerCase()) {
      case "update" -> {
        List<String> key = shardKeys.get(getDatabaseName() + "." + query.get(command));
        if (key != null && query.get("updates") instanceof List<?> statements) {
          for (int i = 0; i < statements.size(); i++) {
            Document statement = (Document) statements.get(i);
            if (Utils.isTrue(statement.get("upsert")) && !routable((Document) statement.getOrDefault("q", new Document()), key)) {
              return new Document("n", 0).append("nModified", 0)
                  .append("writeErrors", List.of(new Document("index", i).append("code", 61).append("errmsg", unroutable(key))))
                  .append("ok", 1.0);
            }
          }
        }
      }
      case "findandmodify" -> {
        List<String> key = shardKeys.get(getDatabaseName() + "." + query.get(command));
        if (key != null && Utils.isTrue(query.get("upsert")) && !routable((Document) query.getOrDefault("query", new Document()), key)) {
          throw new MongoServerError(61, "ShardKeyNotFound", unroutable(key));
        }
      }
      case "explain" -> {
        if (query.get("explain") instanceof Document explained && explained.get("update") != null) {
          List<String> key = shardKeys.get(getDatabaseName() + "." + explained.get("update"));
          if (key != null) {
            for (Object o : (List<?>) explained.getOrDefault("updates", List.of())) {
              Document statement = (Document) o;
              if (Utils.isTrue(statement.get("upsert")) && !routable((Document) statement.getOrDefault("q", new Document()), key)) {
                throw new MongoServerError(61, "ShardKeyNotFound", unroutable(key));
              }
            }
            return new Document("queryPlanner", new Document()).append("ok", 1.0);
          }
        }
      }
      default -> { }
    }
    return null;
  }

  private static boolean routable(Document filter, List<String> key) {
    return PipelineUpdates.equalities(filter, new Document()).keySet().containsAll(key);
  }

  private static String unroutable(List<String> key) {
    return "Failed to target upsert by query :: could not extract exact shard key (shard key " + key + ")";
  }

  private static Instant millis(Instant t) {
    return t.truncatedTo(java.time.temporal.ChronoUnit.MILLIS);
  }

  /** The commands whose filters, pipelines or updates may hold {@code $$NOW} or {@code $currentDate}. */
  private static final Set<String> EVALUATES_NOW = Set.of("find", "count", "aggregate", "findandmodify", "update", "delete");

  /**
   * {@code $currentDate} (date type) of a classic update as the value of the server's clock, as a
   * real {@code mongod} sets it where it applies the update (a mongos passes the update on): the
   * stock server reads the process clock instead. A {@code $type: "timestamp"} is left to it.
   */
  private static Document withCurrentDate(String command, Document query, Instant now) {
    switch (command.toLowerCase()) {
      case "findandmodify" -> {
        if (query.get("update") instanceof Document update) {
          Document q = new Document(query);
          q.put("update", currentDateSet(update, now));
          return q;
        }
      }
      case "update" -> {
        if (query.get("updates") instanceof List<?> statements) {
          Document q = new Document(query);
          List<Object> copies = new ArrayList<>();
          for (Object o : statements) {
            Document statement = new Document((Document) o);
            if (statement.get("u") instanceof Document update) {
              statement.put("u", currentDateSet(update, now));
            }
            copies.add(statement);
          }
          q.put("updates", copies);
          return q;
        }
      }
      default -> { }
    }
    return query;
  }

  private static Document currentDateSet(Document update, Instant now) {
    if (!(update.get("$currentDate") instanceof Document fields)) {
      return update;
    }
    Document out = new Document(update);
    Document keep = new Document();
    Document set = out.get("$set") instanceof Document s ? new Document(s) : new Document();
    fields.forEach((field, spec) -> {
      boolean date = Boolean.TRUE.equals(spec) || spec instanceof Document d && "date".equals(d.get("$type"));
      if (date && !set.containsKey(field)) {
        set.put(field, now);
      } else {
        keep.put(field, spec); // a timestamp, or a conflict the stock server reports as a real one does
      }
    });
    if (keep.isEmpty()) {
      out.remove("$currentDate");
    } else {
      out.put("$currentDate", keep);
    }
    if (!set.isEmpty()) {
      out.put("$set", set);
    }
    return out;
  }

  /** {@code $$NOW} where a command evaluates expressions: filters, pipelines, pipeline updates. */
  private static Document withNow(String command, Document query, Instant now) {
    Document q = new Document(query);
    switch (command.toLowerCase()) {
      case "find" -> replace(q, "filter", now);
      case "count" -> replace(q, "query", now);
      case "aggregate" -> replace(q, "pipeline", now);
      case "findandmodify" -> {
        replace(q, "query", now);
        if (q.get("update") instanceof List) {
          replace(q, "update", now);
        }
      }
      case "update", "delete" -> {
        String list = command.equalsIgnoreCase("update") ? "updates" : "deletes";
        if (q.get(list) instanceof List<?> statements) {
          List<Object> copies = new ArrayList<>();
          for (Object o : statements) {
            Document statement = new Document((Document) o);
            replace(statement, "q", now);
            if (statement.get("u") instanceof List) {
              replace(statement, "u", now);
            }
            copies.add(statement);
          }
          q.put(list, copies);
        }
      }
      default -> { }
    }
    return q;
  }

  private static void replace(Document d, String field, Instant now) {
    if (d.containsKey(field)) {
      d.put(field, PipelineUpdates.withNow(d.get(field), now));
    }
  }

  private void requirePipelineUpdates(String field) {
    if (!pipelineUpdates.getAsBoolean()) {
      // What MongoDB before 4.2 answers.
      throw new MongoServerError(14, "TypeMismatch", "BSON field '" + field + "' is the wrong type 'array', expected type 'object'");
    }
  }

  private Document pipelineUpdate(Document query, List<?> updates, Oplog oplog) {
    requirePipelineUpdates("update.updates.u");
    Document statement = (Document) updates.get(0);
    if (updates.size() != 1 || Utils.isTrue(statement.get("multi"))) {
      throw new MongoServerError(72, "InvalidOptions", "the test kit updates one document per pipeline-update command");
    }
    Document reply = new Document();
    try {
      PipelineUpdates.Outcome outcome = PipelineUpdates.apply(resolveOrCreateCollection(String.valueOf(query.get("update"))),
          (Document) statement.getOrDefault("q", new Document()), (List<?>) statement.get("u"),
          Utils.isTrue(statement.get("upsert")), oplog);
      reply.put("n", outcome.matched() || outcome.upserted() ? 1 : 0);
      reply.put("nModified", outcome.matched() && !outcome.before().equals(outcome.after()) ? 1 : 0);
      if (outcome.upserted()) {
        reply.put("upserted", List.of(new Document("index", 0).append("_id", outcome.after().get("_id"))));
      }
    } catch (MongoServerError e) {
      // A statement's failure is a write error of an otherwise successful command.
      reply.put("n", 0);
      reply.put("nModified", 0);
      reply.put("writeErrors", List.of(new Document("index", 0).append("code", e.getCode()).append("errmsg", e.getMessageWithoutErrorCode())));
    }
    reply.put("ok", 1.0);
    return reply;
  }

  private Document pipelineFindAndModify(String command, Document query, List<?> pipeline, Oplog oplog) {
    requirePipelineUpdates("findAndModify.update");
    if (query.get("sort") instanceof Document sort && !sort.isEmpty()) {
      throw new MongoServerError(72, "InvalidOptions", "the test kit's pipeline findAndModify takes no sort");
    }
    PipelineUpdates.Outcome outcome = PipelineUpdates.apply(resolveOrCreateCollection(String.valueOf(query.get(command))),
        (Document) query.getOrDefault("query", new Document()), pipeline, Utils.isTrue(query.get("upsert")), oplog);
    Document value = Utils.isTrue(query.get("new")) ? outcome.after() : outcome.before();
    Document lastError = new Document("n", outcome.matched() || outcome.upserted() ? 1 : 0)
        .append("updatedExisting", outcome.matched());
    if (outcome.upserted()) {
      lastError.put("upserted", outcome.after().get("_id"));
    }
    return new Document("lastErrorObject", lastError)
        .append("value", value == null ? null : project(value, (Document) query.get("fields")))
        .append("ok", 1.0);
  }

  /** An inclusion projection, as {@code findAndModify} takes one. */
  private static Document project(Document value, Document fields) {
    if (fields == null || fields.isEmpty()) {
      return value;
    }
    Document projected = new Document();
    if (Utils.isTrue(fields.getOrDefault("_id", 1)) && value.containsKey("_id")) {
      projected.put("_id", value.get("_id"));
    }
    fields.forEach((k, v) -> {
      if (!k.equals("_id") && Utils.isTrue(v) && value.containsKey(k)) {
        projected.put(k, value.get(k));
      }
    });
    return projected;
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

  /** {@code filter} with the types the stock server does not know (6, 14) out of {@code $type} lists. */
  private static Object withoutDeprecatedTypes(Object value) {
    if (value instanceof Document d) {
      Document out = new Document();
      d.forEach((k, v) -> out.put(k, "$type".equals(k) && v instanceof List<?> types
          ? types.stream().filter(t -> !(t instanceof Number n && (n.intValue() == 6 || n.intValue() == 14))).toList()
          : withoutDeprecatedTypes(v)));
      return out;
    }
    if (value instanceof List<?> list) {
      return list.stream().map(FaithfulDatabase::withoutDeprecatedTypes).toList();
    }
    return value;
  }

  /** No projection, or one that only names top-level fields to include. */
  private static boolean inclusionOnly(Object projection) {
    return projection == null || projection instanceof Document p
        && p.entrySet().stream().allMatch(e -> !e.getKey().contains(".") && !e.getKey().startsWith("$") && Utils.isTrue(e.getValue()));
  }

  /** {@code entry} with only the fields an inclusion projection names (all without one). */
  private static Document projected(Document entry, Object projection) {
    if (!(projection instanceof Document p) || p.isEmpty()) {
      return entry;
    }
    Document out = new Document();
    p.keySet().forEach(k -> {
      if (entry.containsKey(k)) {
        out.put(k, entry.get(k));
      }
    });
    return out;
  }
}
