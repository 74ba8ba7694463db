package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Multi-document transactions, as the driver runs them ({@code ClientSession.withTransaction},
 * {@code startTransaction}): the first command of a transaction carries {@code startTransaction:
 * true}, every command of it {@code autocommit: false}, {@code txnNumber} and {@code lsid}; then
 * {@code commitTransaction} or {@code abortTransaction} on {@code admin}. The writes of a
 * transaction are kept until it commits and then run together under the server's write lock, and
 * the oplog logs them as one {@code applyOps} entry with one timestamp ({@link
 * FaithfulOplog#commitTransaction}): their change events share one cluster time and differ by
 * {@code txnOpIndex}. An aborted transaction writes nothing.
 *
 * <p>Limits: reads inside a transaction do not see its own writes (they read the committed state);
 * the counts a write replies with inside a transaction are those of its statements (a real server
 * counts the documents matched); a statement that fails at commit (a duplicate key) leaves the
 * statements before it applied; only {@code insert}, {@code update} and {@code delete} are written
 * in a transaction, any other write is refused with 263 OperationNotSupportedInTransaction.
 */
final class Transactions {
  private static final Set<String> WRITES = Set.of("insert", "update", "delete");
  private static final Set<String> READS = Set.of("find", "getmore", "aggregate", "count", "distinct", "killcursors");
  private static final Set<String> SESSION_FIELDS = Set.of("lsid", "txnNumber", "autocommit", "startTransaction",
      "readConcern", "writeConcern", "$clusterTime", "stmtId", "stmtIds", "recoveryToken", "$readPreference");

  /** One write of an open transaction, run at commit. */
  record Write(String database, String command, Document query) {}

  interface Runner {
    /** Runs {@code command} as outside a transaction, without taking the server's locks again. */
    Document run(String database, String command, Document query);

    /** Runs all of {@code writes} under the server's write lock, logged as one applyOps entry. */
    void commit(List<Write> writes, Document lsid, long txnNumber);
  }

  private final Map<String, List<Write>> open = new ConcurrentHashMap<>();
  private final Set<String> committed = ConcurrentHashMap.newKeySet();

  /** Whether {@code query} is a command of a transaction (or ends one). */
  static boolean isTransactional(String command, Document query) {
    return "committransaction".equalsIgnoreCase(command) || "aborttransaction".equalsIgnoreCase(command)
        || query.containsKey("autocommit") && !Utils.isTrue(query.get("autocommit"));
  }

  Document handle(String database, String command, Document query, Runner runner) {
    String name = command.toLowerCase(java.util.Locale.ROOT);
    Document lsid = query.get("lsid") instanceof Document d ? d : null;
    Object number = query.get("txnNumber");
    if (lsid == null || !(number instanceof Number txnNumber)) {
      return error(72, "InvalidOptions", "a transaction's commands carry lsid and txnNumber", false);
    }
    String key = lsid.get("id") + "#" + txnNumber.longValue();
    switch (name) {
      case "committransaction" -> {
        List<Write> writes = open.remove(key);
        if (writes == null) {
          // Committing again (the driver retries a commit whose reply it lost) answers as the first.
          return committed.contains(key) ? ok() : error(251, "NoSuchTransaction",
              "Transaction with { txnNumber: " + txnNumber + " } has been aborted.", true);
        }
        runner.commit(writes, lsid, txnNumber.longValue());
        committed.add(key);
        return ok();
      }
      case "aborttransaction" -> {
        return open.remove(key) == null
            ? error(251, "NoSuchTransaction", "Transaction with { txnNumber: " + txnNumber + " } has been aborted.", false)
            : ok();
      }
      default -> { }
    }
    if (Utils.isTrue(query.get("startTransaction"))) {
      open.put(key, new ArrayList<>());
    }
    List<Write> writes = open.get(key);
    if (writes == null) {
      return error(251, "NoSuchTransaction", "Transaction with { txnNumber: " + txnNumber + " } has been aborted.", true);
    }
    Document plain = new Document(query);
    SESSION_FIELDS.forEach(plain::remove);
    if (READS.contains(name)) {
      return runner.run(database, command, plain);
    }
    if (!WRITES.contains(name)) {
      return error(263, "OperationNotSupportedInTransaction",
          "the test kit runs only insert, update, delete and reads in a transaction, not " + command, false);
    }
    writes.add(new Write(database, command, plain));
    int statements = switch (name) {
      case "insert" -> ((List<?>) plain.getOrDefault("documents", List.of())).size();
      case "update" -> ((List<?>) plain.getOrDefault("updates", List.of())).size();
      default -> ((List<?>) plain.getOrDefault("deletes", List.of())).size();
    };
    Document reply = new Document("n", statements);
    if (name.equals("update")) {
      reply.append("nModified", statements);
    }
    return reply.append("ok", 1.0);
  }

  private static Document ok() {
    return new Document("ok", 1.0);
  }

  private static Document error(int code, String codeName, String message, boolean transient_) {
    Document reply = new Document("ok", 0.0).append("errmsg", message).append("code", code).append("codeName", codeName);
    if (transient_) {
      reply.append("errorLabels", List.of("TransientTransactionError"));
    }
    return reply;
  }
}
