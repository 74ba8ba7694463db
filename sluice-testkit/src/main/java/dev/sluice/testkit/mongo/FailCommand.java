package dev.sluice.testkit.mongo;

import com.mongodb.client.MongoClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonString;
import org.bson.BsonValue;

/**
 * MongoDB's {@code failCommand} fail point, armed from a test: the same {@code configureFailPoint}
 * command a real {@code mongod} started with {@code --setParameter enableTestCommands=1} accepts,
 * and the test kit's server answers ({@code FailPoints}). So a test that makes the server answer
 * an error a real one gives runs unchanged against a real deployment
 * ({@code -Dsluice.mongodb.uri}).
 *
 * <pre>{@code
 * try (FailCommand.Armed f = FailCommand.on("getMore").errorCode(136).times(1).enable(client)) {
 *   ... // the next getMore fails with 136 CappedPositionLost
 * }
 * }</pre>
 *
 * <p>Immutable: each method returns a new description.
 */
public final class FailCommand {
  private final List<String> commands;
  private final BsonValue mode;
  private final BsonDocument data;

  private FailCommand(List<String> commands, BsonValue mode, BsonDocument data) {
    this.commands = commands;
    this.mode = mode;
    this.data = data;
  }

  /** Fails the commands named (exactly as the driver sends them: {@code getMore}, {@code findAndModify}). */
  public static FailCommand on(String... commands) {
    if (commands.length == 0) {
      throw new IllegalArgumentException("name at least one command");
    }
    BsonArray names = new BsonArray();
    for (String c : commands) {
      names.add(new BsonString(Objects.requireNonNull(c, "command")));
    }
    return new FailCommand(List.of(commands), new BsonString("alwaysOn"),
        new BsonDocument("failCommands", names));
  }

  /** The commands answer error {@code code}. */
  public FailCommand errorCode(int code) {
    return with("errorCode", new BsonInt32(code));
  }

  /** The error carries exactly these labels (a real server adds none to a fail point's error on a cursor). */
  public FailCommand errorLabels(String... labels) {
    BsonArray array = new BsonArray();
    for (String l : labels) {
      array.add(new BsonString(l));
    }
    return with("errorLabels", array);
  }

  /** The server closes the connection instead of answering. */
  public FailCommand closeConnection() {
    return with("closeConnection", BsonBoolean.TRUE);
  }

  /** The server holds the command this long before running (or failing) it. */
  public FailCommand block(Duration time) {
    return with("blockConnection", BsonBoolean.TRUE).with("blockTimeMS", new BsonInt64(time.toMillis()));
  }

  /** The command runs, and its reply carries a write concern error with this code and message. */
  public FailCommand writeConcernError(int code, String message) {
    return with("writeConcernError", new BsonDocument("code", new BsonInt32(code))
        .append("codeName", new BsonString(FailPoints.codeName(code)))
        .append("errmsg", new BsonString(message)));
  }

  /** Only commands of clients whose application name (MongoClientSettings.applicationName) is this. */
  public FailCommand appName(String name) {
    return with("appName", new BsonString(name));
  }

  /** Only commands on this namespace ({@code database.collection}). */
  public FailCommand namespace(String namespace) {
    return with("namespace", new BsonString(namespace));
  }

  /** Fires for the next {@code n} matching commands, then turns itself off. */
  public FailCommand times(int n) {
    return new FailCommand(commands, new BsonDocument("times", new BsonInt32(n)), data);
  }

  /** Lets the next {@code n} matching commands through, then fires for every one. */
  public FailCommand skip(int n) {
    return new FailCommand(commands, new BsonDocument("skip", new BsonInt32(n)), data);
  }

  /** Fires for every matching command until turned off (the default). */
  public FailCommand alwaysOn() {
    return new FailCommand(commands, new BsonString("alwaysOn"), data);
  }

  /** The {@code configureFailPoint} command this describes. */
  public BsonDocument command() {
    return new BsonDocument("configureFailPoint", new BsonString(FailPoints.NAME))
        .append("mode", mode)
        .append("data", data.clone());
  }

  /** Arms it on the deployment {@code client} reaches (its admin database). */
  public Armed enable(MongoClient client) {
    BsonDocument reply = client.getDatabase("admin").runCommand(command(), BsonDocument.class);
    return new Armed(client, reply.getNumber("count", new BsonInt32(0)).longValue());
  }

  private FailCommand with(String key, BsonValue value) {
    BsonDocument copy = data.clone();
    copy.put(key, value);
    return new FailCommand(new ArrayList<>(commands), mode, copy);
  }

  @Override
  public String toString() {
    return command().toJson();
  }

  /** An armed fail point; {@link #close()} turns it off. */
  public static final class Armed implements AutoCloseable {
    private final MongoClient client;
    private final long enteredBefore;

    private Armed(MongoClient client, long enteredBefore) {
      this.client = client;
      this.enteredBefore = enteredBefore;
    }

    /**
     * Waits until the fail point has fired {@code times} times since it was armed, at most
     * {@code timeout}: the server's {@code waitForFailPoint}, asked in short waits so that no
     * server thread is held for long.
     */
    public void awaitFired(int times, Duration timeout) {
      BsonDocument wait = new BsonDocument("waitForFailPoint", new BsonString(FailPoints.NAME))
          .append("timesEntered", new BsonInt64(enteredBefore + times))
          .append("maxTimeMS", new BsonInt64(100));
      org.awaitility.Awaitility.await("fail point fired " + times + " times").atMost(timeout)
          .pollInterval(Duration.ofMillis(10))
          .until(() -> {
            try {
              client.getDatabase("admin").runCommand(wait);
              return true;
            } catch (com.mongodb.MongoExecutionTimeoutException notYet) {
              return false;
            } catch (com.mongodb.MongoCommandException e) {
              if (e.getErrorCode() == 50) {
                return false;
              }
              throw e;
            }
          });
    }

    @Override
    public void close() {
      client.getDatabase("admin").runCommand(new BsonDocument("configureFailPoint", new BsonString(FailPoints.NAME))
          .append("mode", new BsonString("off")));
    }
  }
}
