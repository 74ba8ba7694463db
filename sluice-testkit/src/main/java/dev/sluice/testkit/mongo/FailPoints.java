package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The {@code failCommand} fail point of a real {@code mongod} (4.4+), as MongoDB's own tests and
 * the drivers' specification tests use it: {@code configureFailPoint} on the admin database arms
 * it, and the commands it names then fail (or block, or lose their connection) as a real server's
 * would. A test written against it runs unchanged on a real server started with
 * {@code --setParameter enableTestCommands=1}.
 *
 * <p>Accepted as a real server accepts it: {@code mode} {@code "alwaysOn"}, {@code "off"},
 * {@code {times: n}}, {@code {skip: n}} or {@code {activationProbability: p}}; {@code data} with
 * {@code failCommands} (required, exact command names), {@code errorCode}, {@code errorLabels},
 * {@code closeConnection}, {@code blockConnection} with {@code blockTimeMS}, {@code writeConcernError}
 * (a document put into the reply of a command that ran), {@code appName} (the client's application
 * name from its handshake) and {@code namespace}. The reply is {@code {count: n, ok: 1}}, n the
 * times the fail point was entered so far. {@code waitForFailPoint} waits until it has been entered
 * a number of times, as on a real server.
 *
 * <p>Error labels: exactly the {@code errorLabels} given. Without them a real server adds
 * {@code RetryableWriteError} to a retryable write (a write carrying {@code txnNumber}) that fails
 * with a retryable code, and so does this one; it adds no {@code ResumableChangeStreamError} to an
 * error of this fail point (it fires before the server knows the cursor is a change stream, which
 * is why the drivers' change-stream tests name the label themselves).
 */
final class FailPoints {
  static final String NAME = "failCommand";

  /** Codes after which a retryable write is retried: the retryable-writes specification's list. */
  private static final Set<Integer> RETRYABLE_WRITE_CODES =
      Set.of(6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436);

  /** The names a real server gives the codes tests use, for {@code codeName} in replies. */
  private static final Map<Integer, String> CODE_NAMES = Map.ofEntries(
      Map.entry(2, "BadValue"), Map.entry(6, "HostUnreachable"), Map.entry(7, "HostNotFound"),
      Map.entry(11, "UserNotFound"), Map.entry(13, "Unauthorized"), Map.entry(18, "AuthenticationFailed"),
      Map.entry(26, "NamespaceNotFound"), Map.entry(43, "CursorNotFound"), Map.entry(47, "NoMatchingDocument"),
      Map.entry(50, "MaxTimeMSExpired"), Map.entry(63, "StaleShardVersion"), Map.entry(64, "WriteConcernFailed"),
      Map.entry(89, "NetworkTimeout"), Map.entry(91, "ShutdownInProgress"), Map.entry(100, "UnsatisfiableWriteConcern"),
      Map.entry(112, "WriteConflict"), Map.entry(133, "FailedToSatisfyReadPreference"),
      Map.entry(134, "ReadConcernMajorityNotAvailableYet"),
      Map.entry(136, "CappedPositionLost"), Map.entry(150, "StaleEpoch"), Map.entry(189, "PrimarySteppedDown"),
      Map.entry(202, "NetworkInterfaceExceededTimeLimit"),
      Map.entry(234, "RetryChangeStream"), Map.entry(237, "CursorKilled"), Map.entry(239, "SnapshotTooOld"),
      Map.entry(246, "SnapshotUnavailable"), Map.entry(251, "NoSuchTransaction"), Map.entry(260, "InvalidResumeToken"),
      Map.entry(262, "ExceededTimeLimit"), Map.entry(280, "ChangeStreamFatalError"),
      Map.entry(286, "ChangeStreamHistoryLost"), Map.entry(9001, "SocketException"),
      Map.entry(10107, "NotWritablePrimary"), Map.entry(10334, "BSONObjectTooLarge"),
      Map.entry(11000, "DuplicateKey"), Map.entry(11600, "InterruptedAtShutdown"), Map.entry(11601, "Interrupted"),
      Map.entry(11602, "InterruptedDueToReplStateChange"), Map.entry(13388, "StaleConfig"),
      Map.entry(13435, "NotPrimaryNoSecondaryOk"), Map.entry(13436, "NotPrimaryOrSecondary"));

  /** What an armed fail point does to a command it matches. */
  record Action(Integer errorCode, List<String> errorLabels, boolean closeConnection, long blockMillis,
      Document writeConcernError) {}

  private Document data;
  private String mode = "off";
  /** Whether any command can fire it: read without the lock on every command. */
  private volatile boolean armed;
  private long remaining; // times: fires left; skip: matches left to pass
  private double probability;
  private long timesEntered;

  /** Answers {@code configureFailPoint}. */
  synchronized Document configure(Document command) {
    Object name = command.get("configureFailPoint");
    if (!NAME.equals(name)) {
      throw new MongoServerError(2, "BadValue", "Cannot find failpoint " + name
          + " (the test kit has only '" + NAME + "')");
    }
    Object m = command.get("mode");
    Document d = command.get("data") instanceof Document given ? given : null;
    if ("off".equals(m)) {
      mode = "off";
      data = null;
      armed = false;
    } else {
      if (d == null || !(d.get("failCommands") instanceof List<?> commands) || commands.isEmpty()) {
        throw new MongoServerError(2, "BadValue", "'data.failCommands' must be a non-empty array of command names");
      }
      if ("alwaysOn".equals(m)) {
        mode = "alwaysOn";
      } else if (m instanceof Document md && md.get("times") instanceof Number n) {
        mode = "times";
        remaining = n.longValue();
      } else if (m instanceof Document md && md.get("skip") instanceof Number n) {
        mode = "skip";
        remaining = n.longValue();
      } else if (m instanceof Document md && md.get("activationProbability") instanceof Number p) {
        mode = "random";
        probability = p.doubleValue();
      } else {
        throw new MongoServerError(2, "BadValue", "'mode' must be \"alwaysOn\", \"off\", {times: n}, {skip: n}"
            + " or {activationProbability: p}, was " + m);
      }
      data = d;
      armed = true;
    }
    notifyAll();
    return new Document("count", timesEntered).append("ok", 1.0);
  }

  /** Answers {@code waitForFailPoint}: waits until it was entered {@code timesEntered} times. */
  synchronized Document await(Document command) throws InterruptedException {
    if (!NAME.equals(command.get("waitForFailPoint"))) {
      throw new MongoServerError(2, "BadValue", "Cannot find failpoint " + command.get("waitForFailPoint"));
    }
    long target = ((Number) command.getOrDefault("timesEntered", 1)).longValue();
    long maxMillis = ((Number) command.getOrDefault("maxTimeMS", 30_000)).longValue();
    long deadline = System.currentTimeMillis() + maxMillis;
    while (timesEntered < target) {
      long left = deadline - System.currentTimeMillis();
      if (left <= 0) {
        throw new MongoServerError(50, "MaxTimeMSExpired", "operation exceeded time limit");
      }
      wait(left);
    }
    return new Document("ok", 1.0);
  }

  /**
   * Whether the fail point fires for {@code command} on {@code namespace} from a client named
   * {@code appName}, counting the hit as a real server does; null when it does not.
   */
  Action enter(String command, String namespace, String appName) {
    return armed ? enterArmed(command, namespace, appName) : null;
  }

  private synchronized Action enterArmed(String command, String namespace, String appName) {
    if ("off".equals(mode) || data == null) {
      return null;
    }
    if (!((List<?>) data.get("failCommands")).contains(command)) {
      return null;
    }
    if (data.get("appName") instanceof String wanted && !wanted.equals(appName)) {
      return null;
    }
    if (data.get("namespace") instanceof String ns && !ns.equals(namespace)) {
      return null;
    }
    switch (mode) {
      case "skip" -> {
        if (remaining > 0) {
          remaining--;
          return null;
        }
      }
      case "times" -> {
        if (remaining <= 0) {
          return null;
        }
        if (--remaining == 0) {
          mode = "off";
          armed = false;
        }
      }
      case "random" -> {
        if (ThreadLocalRandom.current().nextDouble() >= probability) {
          return null;
        }
      }
      default -> { }
    }
    Document fired = data;
    timesEntered++;
    notifyAll();
    List<String> labels = fired.get("errorLabels") instanceof List<?> l
        ? l.stream().map(String::valueOf).toList() : null;
    long block = Utils.isTrue(fired.get("blockConnection")) && fired.get("blockTimeMS") instanceof Number b
        ? b.longValue() : 0;
    return new Action(fired.get("errorCode") instanceof Number c ? c.intValue() : null, labels,
        Utils.isTrue(fired.get("closeConnection")), block,
        fired.get("writeConcernError") instanceof Document w ? w : null);
  }

  /** The reply of a command failed by {@code action}, labelled as a real server labels it. */
  static Document errorReply(Action action, Document command) {
    int code = action.errorCode();
    Document reply = new Document("ok", 0.0)
        .append("errmsg", "Failing command via '" + NAME + "' failpoint")
        .append("code", code)
        .append("codeName", codeName(code));
    List<String> labels = action.errorLabels();
    if (labels == null && retryableWrite(command) && RETRYABLE_WRITE_CODES.contains(code)) {
      labels = List.of("RetryableWriteError");
    }
    if (labels != null && !labels.isEmpty()) {
      reply.put("errorLabels", labels);
    }
    return reply;
  }

  /** {@code reply} of a command that ran, with the fail point's write concern error. */
  static Document withWriteConcernError(Action action, Document reply, Document command) {
    Document error = new Document(action.writeConcernError());
    reply.put("writeConcernError", error);
    List<String> labels = action.errorLabels();
    if (labels == null && retryableWrite(command) && error.get("code") instanceof Number c
        && RETRYABLE_WRITE_CODES.contains(c.intValue())) {
      labels = List.of("RetryableWriteError");
    }
    if (labels != null && !labels.isEmpty()) {
      reply.put("errorLabels", labels);
    }
    return reply;
  }

  static String codeName(int code) {
    return CODE_NAMES.getOrDefault(code, "Location" + code);
  }

  /** A write the driver may retry: it carries a transaction number outside a transaction. */
  private static boolean retryableWrite(Document command) {
    return command.containsKey("txnNumber") && !command.containsKey("autocommit");
  }
}
