package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.app.service.config.ConfigException;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.app.service.config.Durations;
import dev.sluice.feed.SourceHistory;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.concurrent.Callable;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.function.Supplier;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * Prints the leases of a stream: owner, epoch, expiry and checkpoint of every partition, with how
 * far each checkpoint is behind the source (LAG) and how much source history is left before it
 * falls out of the oplog window (HISTORY LEFT). The leases are those of a MongoDB ({@code --mongo},
 * {@code --database}) or of a configuration file's source ({@code --config}: MongoDB or
 * PostgreSQL; PostgreSQL has no oplog window, so HISTORY LEFT is "-" there).
 */
@Command(name = "status", mixinStandardHelpOptions = true,
    description = "Show who owns each partition of a stream, its epoch and checkpoint, how far the checkpoint"
        + " is behind the source and how much oplog history is left behind it.")
public final class StatusCommand implements Callable<Integer> {

  @Option(names = "--mongo", description = "MongoDB connection string (with --database; or --config)")
  String mongo;

  @Option(names = "--database", description = "database holding the lease collection")
  String database;

  @Option(names = "--leases", defaultValue = MongoLeaseStore.DEFAULT_COLLECTION,
      description = "lease collection, with --mongo (default: ${DEFAULT-VALUE})")
  String collection;

  @Option(names = "--config", description = "a service configuration file instead of --mongo and --database:"
      + " the leases of its source (MongoDB or PostgreSQL)")
  Path config;

  @Option(names = "--stream", defaultValue = "",
      description = "only records whose stream (database.collection) or name starts with this, e.g. shop.orders")
  String stream;

  @Spec CommandSpec spec;

  @Option(names = "--watch", paramLabel = "INTERVAL",
      description = "print the table again every INTERVAL (e.g. 5s) until interrupted")
  String watch;

  @Override
  public Integer call() throws InterruptedException {
    Duration every = null;
    if (watch != null) {
      // An option, not the file: a usage error (exit 2), as every other bad option value.
      try {
        every = Durations.parse(watch, "--watch");
      } catch (ConfigException e) {
        throw new ParameterException(spec.commandLine(), e.getMessage());
      }
      if (every.compareTo(Duration.ofMillis(500)) < 0) {
        throw new ParameterException(spec.commandLine(),
            "--watch: must be at least 500ms, but was " + watch);
      }
    }
    if (config != null) {
      if (mongo != null || database != null) {
        throw new ParameterException(spec.commandLine(), "--config replaces --mongo and --database: give one or the other");
      }
      SluiceConfig c = ConfigLoader.load(config);
      try (Wiring<?> wiring = Wiring.connect(c, false)) {
        // Every feed of a source reads the same server's clock: the first listener's tells the time.
        ChangeFeed<?> server = wiring.feed(c.listeners().get(0));
        return print(wiring.leaseStore(), server, every, () -> new ConfigException("--config",
            "no lease records in the " + wiring.sourceName() + " source of " + config
                + (stream.isEmpty() ? "" : " for streams starting with '" + stream + "'")
                + ": has a listener of it run yet? check --stream"));
      }
    }
    if (mongo == null || database == null) {
      throw new ParameterException(spec.commandLine(), "give --mongo and --database, or --config");
    }
    com.mongodb.ConnectionString connection;
    try {
      connection = new com.mongodb.ConnectionString(mongo);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), dev.sluice.app.cli.Secrets.mask("--mongo '" + mongo
          + "' is not a valid MongoDB connection string: " + e.getMessage()));
    }
    try {
      com.mongodb.MongoNamespace.checkDatabaseNameValidity(database);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), "--database '" + database + "' is not a MongoDB database name: "
          + e.getMessage());
    }
    try (MongoClient client = MongoClients.create(connection)) {
      LeaseStore store = MongoLeaseStore.builder(client.getDatabase(database)).collection(collection).build();
      MongoChangeFeed server = MongoChangeFeed.builder(client, database, collection).build();
      return print(store, server, every, () -> new ConfigException("--database", "no lease records in " + database
          + "." + collection + (stream.isEmpty() ? "" : " for streams starting with '" + stream + "'")
          + ": check --database, --leases and --stream" + elsewhere(client)));
    }
  }

  /** Prints the table once, or every {@code every} until interrupted; none found is {@code none}'s error. */
  private int print(LeaseStore store, ChangeFeed<?> server, Duration every, Supplier<ConfigException> none)
      throws InterruptedException {
    while (true) {
      List<LeaseRecord> records = store.list("").stream()
          .filter(r -> r.name().startsWith(stream) || describe(r.name())[2].startsWith(stream)).toList();
      if (records.isEmpty()) {
        throw none.get();
      }
      PrintWriter out = spec.commandLine().getOut();
      out.print(format(records, history(server)));
      out.flush();
      if (every == null) {
        return 0;
      }
      out.println();
      Thread.sleep(every.toMillis());
    }
  }

  /** The source's history (MongoDB: server-wide, the oplog), or unknown if it cannot be read. */
  private static SourceHistory history(ChangeFeed<?> server) {
    try {
      return server.history();
    } catch (RuntimeException e) {
      return SourceHistory.UNKNOWN;
    }
  }

  /** Where lease collections of this name are, as a hint after a misspelt database. */
  private String elsewhere(MongoClient client) {
    try {
      List<String> found = new ArrayList<>();
      for (String db : client.listDatabaseNames()) {
        if (!db.equals(database)
            && client.getDatabase(db).listCollectionNames().into(new ArrayList<>()).contains(collection)) {
          found.add(db);
        }
      }
      return found.isEmpty() ? "" : "; databases with a " + collection + " collection: " + String.join(", ", found);
    } catch (RuntimeException e) {
      return "";
    }
  }

  /**
   * A table of lease records, one line each: what the record is (a partition of a consumer group,
   * a group member, a lock, or a record from before consumer groups), its group, stream and
   * partition, and the owner's label (the part of the owner identity people gave).
   */
  public static String format(List<LeaseRecord> records) {
    return format(records, SourceHistory.UNKNOWN);
  }

  /**
   * As {@link #format(List)}, with LAG (the source's newest time minus the checkpoint's: the
   * running process may be up to one checkpoint interval further) and HISTORY LEFT (the
   * checkpoint's time minus the oplog's oldest entry) where {@code history} tells.
   */
  public static String format(List<LeaseRecord> records, SourceHistory history) {
    String row = "%-9s %-20s %-24s %-9s %-16s %8s %-5s %-11s %-9s %-12s %s%n";
    StringBuilder out = new StringBuilder(String.format(row, "KIND", "GROUP", "STREAM", "PARTITION",
        "OWNER LABEL", "EPOCH", "HELD", "EXPIRES IN", "LAG", "HISTORY LEFT", "CHECKPOINT"));
    for (LeaseRecord r : records) {
      String[] n = describe(r.name());
      String expires = r.expiresAt() == null ? "-" : Duration.between(r.storeTime(), r.expiresAt()).toMillis() + " ms";
      Instant at = r.checkpoint() == null ? null : r.checkpoint().time();
      String lag = at == null || history.newest() == null ? "-"
          : seconds(Duration.between(at, history.newest()));
      String left = at == null || history.oldest() == null ? "-"
          : seconds(Duration.between(history.oldest(), at));
      out.append(String.format(row, n[0], n[1], n[2], n[3], r.owner() == null ? "-" : label(r.owner()),
          r.epoch(), r.isHeld() ? "yes" : "no", expires, lag, left,
          r.checkpoint() == null ? "-" : abbreviate(r.checkpoint().toString())));
    }
    return out.toString();
  }

  private static String seconds(Duration d) {
    return d.isNegative() ? "0 s" : d.toSeconds() + " s";
  }

  /** {kind, group, stream, partition} of a lease name (see ListenerConfig.leaseName). */
  static String[] describe(String name) {
    Matcher partition = PARTITION.matcher(name);
    if (partition.matches()) {
      return new String[] {"partition", partition.group(1), partition.group(2),
          partition.group(3) + "/" + partition.group(4)};
    }
    Matcher member = MEMBER.matcher(name);
    if (member.matches()) {
      return new String[] {"member", member.group(1), member.group(2), "-"};
    }
    Matcher legacy = LEGACY.matcher(name);
    if (legacy.matches()) {
      return new String[] {"legacy", "-", legacy.group(1), legacy.group(2)};
    }
    return new String[] {"lock", "-", name, "-"};
  }

  /** The label part of an owner identity {@code label/pid@host/random#n}. */
  static String label(String owner) {
    int slash = owner.indexOf('/');
    return slash > 0 ? owner.substring(0, slash) : owner;
  }

  private static final Pattern PARTITION = Pattern.compile("([^/]+)/([^#@]+)#([0-9]+)of([0-9]+)");
  private static final Pattern MEMBER = Pattern.compile("([^/]+)/([^#@]+)@member:.*");
  private static final Pattern LEGACY = Pattern.compile("([^/#@]+)#([0-9]+)");

  private static String abbreviate(String s) {
    return s.length() <= 60 ? s : s.substring(0, 28) + "..." + s.substring(s.length() - 28);
  }
}
