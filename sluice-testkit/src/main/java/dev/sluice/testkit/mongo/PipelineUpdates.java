package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.ArrayFilters;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.aggregation.Expression;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What the stock embedded server lacks and MongoDB has since 4.2: updates given as an aggregation
 * pipeline ({@code update} and {@code findAndModify} with an array), and {@code $$NOW} as one
 * value per command read from the server's clock (the stock server reads the process clock at
 * every evaluation). Pipeline stages {@code $set}, {@code $addFields} and {@code $unset} on
 * top-level fields, one document per statement: what Sluice sends. A pipeline is evaluated against
 * the document as it was before the stage, as on a real server, and the read and the write of one
 * statement hold the collection's lock, so they are atomic with respect to every other command.
 */
final class PipelineUpdates {
  private PipelineUpdates() {}

  /** The outcome of one statement: the document before and after, or what an upsert inserted. */
  record Outcome(Document before, Document after, boolean upserted) {
    boolean matched() {
      return before != null;
    }
  }

  /** {@code "$$NOW"} anywhere in {@code value} replaced by the literal {@code now}. */
  static Object withNow(Object value, Instant now) {
    if ("$$NOW".equals(value)) {
      return new Document("$literal", now);
    }
    if (value instanceof Document d) {
      Document copy = new Document();
      d.forEach((k, v) -> copy.put(k, withNow(v, now)));
      return copy;
    }
    if (value instanceof List<?> list) {
      List<Object> copy = new ArrayList<>();
      list.forEach(v -> copy.add(withNow(v, now)));
      return copy;
    }
    return value;
  }

  static Outcome apply(MongoCollection<?> collection, Document filter, List<?> pipeline, boolean upsert, Oplog oplog) {
    synchronized (collection) {
      Document current = null;
      for (Document d : collection.handleQuery(filter, 0, 1)) {
        current = d;
      }
      if (current == null) {
        if (!upsert) {
          return new Outcome(null, null, false);
        }
        Document inserted = run(pipeline, equalities(filter, new Document()));
        inserted.putIfAbsent("_id", new ObjectId());
        List<Document> errors = collection.insertDocuments(List.of(inserted), true);
        if (!errors.isEmpty()) {
          Document error = errors.get(0);
          throw new MongoServerError(((Number) error.get("code")).intValue(), String.valueOf(error.get("errmsg")));
        }
        oplog.handleInsert(collection.getFullName(), List.of(inserted));
        return new Outcome(null, inserted, true);
      }
      Document after = run(pipeline, current);
      Object id = current.get("_id");
      if (!id.equals(after.get("_id"))) {
        throw new MongoServerError(66, "ImmutableField", "Performing an update on the path '_id' would modify the immutable field '_id'");
      }
      collection.updateDocuments(new Document("_id", id), after, ArrayFilters.empty(), false, false, oplog);
      return new Outcome(current, after, false);
    }
  }

  /** The fields an upsert copies from its filter: top-level equalities, also inside {@code $and}. */
  static Document equalities(Document filter, Document into) {
    for (Map.Entry<String, Object> e : filter.entrySet()) {
      if (e.getKey().equals("$and") && e.getValue() instanceof List<?> all) {
        for (Object part : all) {
          equalities((Document) part, into);
        }
      } else if (!e.getKey().startsWith("$") && !isOperator(e.getValue())) {
        into.put(e.getKey(), e.getValue());
      } else if (e.getValue() instanceof Document d && d.size() == 1 && d.containsKey("$eq")) {
        into.put(e.getKey(), d.get("$eq"));
      }
    }
    return into;
  }

  private static boolean isOperator(Object value) {
    return value instanceof Document d && !d.isEmpty() && d.keySet().iterator().next().startsWith("$");
  }

  private static Document run(List<?> pipeline, Document document) {
    Document current = document;
    for (Object s : pipeline) {
      Document stage = (Document) s;
      if (stage.size() != 1) {
        throw new MongoServerError(40323, "A pipeline stage specification object must contain exactly one field.");
      }
      String name = stage.keySet().iterator().next();
      Object spec = stage.get(name);
      Document next = current.clone();
      switch (name) {
        case "$set", "$addFields" -> {
          for (Map.Entry<String, Object> e : ((Document) spec).entrySet()) {
            requireTopLevel(e.getKey());
            Object value = Expression.evaluateDocument(e.getValue(), current);
            if (value instanceof Missing) {
              next.remove(e.getKey());
            } else {
              next.put(e.getKey(), value);
            }
          }
        }
        case "$unset" -> {
          for (Object field : spec instanceof List<?> fields ? fields : List.of(spec)) {
            requireTopLevel(String.valueOf(field));
            next.remove(String.valueOf(field));
          }
        }
        default -> throw new MongoServerError(72, "InvalidOptions",
            "the test kit's pipeline updates support $set, $addFields and $unset, not " + name);
      }
      current = next;
    }
    return current;
  }

  private static void requireTopLevel(String field) {
    if (field.contains(".")) {
      throw new MongoServerError(72, "InvalidOptions", "the test kit's pipeline updates set top-level fields only, not " + field);
    }
  }
}
