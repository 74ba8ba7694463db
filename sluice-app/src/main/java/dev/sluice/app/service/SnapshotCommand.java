package dev.sluice.app.service;

import dev.sluice.app.service.config.ConfigException;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.feed.SnapshotRequest;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.json.JsonParseException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code sluice snapshot}: asks a running MongoDB listener (a consumer group) to read its
 * collection, or an {@code _id} range of it, again while it streams on ({@code docs/adr/0067}),
 * and shows each partition's progress: done, reading (after which {@code _id}, from its
 * checkpoint), or waiting.
 */
@Command(name = "snapshot", mixinStandardHelpOptions = true,
    description = "Ask a MongoDB listener to read its collection (or an _id range) again while it streams on,"
        + " and show each partition's progress.")
public final class SnapshotCommand implements Callable<Integer> {
  private static final Duration WAIT_POLL = Duration.ofSeconds(1);

  @Option(names = "--config", required = true, description = "YAML configuration file")
  Path configFile;

  @Option(names = "--listener", required = true, paramLabel = "GROUP",
      description = "the listener's consumer group (its 'group' in the file, default kafka-<topic> or amqp-<exchange>)")
  String listener;

  @Option(names = "--collection", description = "the collection, when the group reads several")
  String collection;

  @Option(names = "--from-id", paramLabel = "ID",
      description = "first _id read again (inclusive), as extended JSON: 42, '\"abc\"', '{\"$oid\": \"...\"}';"
          + " a value that is not JSON is a string")
  String fromId;

  @Option(names = "--to-id", paramLabel = "ID", description = "last _id read again (inclusive), as --from-id")
  String toId;

  @Option(names = "--progress", description = "only show the group's requests and their progress; request nothing")
  boolean progressOnly;

  @Option(names = "--wait", description = "after the request, show the progress as it changes until every partition is done")
  boolean waitForIt;

  @Option(names = "--timeout", paramLabel = "DURATION", defaultValue = "PT1H",
      converter = DurationConverter.class,
      description = "with --wait: how long to wait at most (default 1h; e.g. 30m, 2h); past it the exit code is 1"
          + " and the request stays, taken up whenever the group's members run")
  Duration timeout;

  /** {@code 30m}, {@code 2h}, {@code 90s} or an ISO-8601 duration. */
  static final class DurationConverter implements picocli.CommandLine.ITypeConverter<Duration> {
    @Override
    public Duration convert(String value) {
      String v = value.strip().toLowerCase(java.util.Locale.ROOT);
      Duration d;
      try {
        d = v.startsWith("p") ? Duration.parse(v.toUpperCase(java.util.Locale.ROOT))
            : Duration.parse("PT" + v.toUpperCase(java.util.Locale.ROOT));
      } catch (java.time.format.DateTimeParseException e) {
        throw new picocli.CommandLine.TypeConversionException("'" + value + "' is not a duration (30m, 2h, 90s)");
      }
      if (d.isNegative() || d.isZero()) {
        throw new picocli.CommandLine.TypeConversionException("must be positive, but was '" + value + "'");
      }
      return d;
    }
  }

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws InterruptedException {
    if (progressOnly && (fromId != null || toId != null || waitForIt)) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(),
          "--progress requests nothing: give it without --from-id, --to-id and --wait");
    }
    BsonValue from = fromId == null ? null : idOption("--from-id", fromId);
    BsonValue to = toId == null ? null : idOption("--to-id", toId);
    if (from != null && to != null && compareSameType(from, to) > 0) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--from-id " + fromId
          + " is after --to-id " + toId + ": the range would be empty; give the first _id in --from-id");
    }
    SluiceConfig config = ConfigLoader.load(configFile);
    if (config.mongodb() == null) {
      throw new ConfigException(configFile + ": postgres", "re-snapshots on request are for MongoDB listeners; a"
          + " PostgreSQL listener reads its tables again with 'sluice replay --from current', or on its own after lost"
          + " history with onHistoryLost: resnapshot");
    }
    try (Wiring<?> wiring = Wiring.connect(config, false)) {
      ListenerSection section = wiring.section(collection, listener);
      ChangeFeed<?> feed = wiring.feed(section);
      if (!(feed instanceof MongoChangeFeed mongo)) {
        throw new IllegalStateException("a mongodb source gave a feed of another kind: " + feed);
      }
      int partitions = dev.sluice.listener.ListenerSettings.PARTITIONS.orDefault(section.partitions());
      PrintWriter out = spec.commandLine().getOut();
      SnapshotRequest asked = null;
      if (!progressOnly) {
        asked = mongo.requestSnapshot(listener, from, to);
        out.printf("Requested re-snapshot %s of %s for group %s: %s. Each partition takes it up within %d s once it"
                + " streams.%n", asked.id(), mongo.stream(), listener, asked.range(),
            MongoChangeFeed.DEFAULT_SNAPSHOT_REQUEST_INTERVAL.toSeconds());
      }
      String shown = null;
      long deadline = System.nanoTime() + timeout.toNanos();
      boolean saidNoMember = false;
      while (true) {
        List<SnapshotRequest> requests = mongo.snapshotRequests(listener);
        String table = table(requests, wiring.leaseStore(), mongo.stream(), partitions);
        if (!table.equals(shown)) {
          out.print(table);
          out.flush();
          shown = table;
        }
        if (!waitForIt) {
          return 0;
        }
        String id = asked.id();
        if (requests.stream().anyMatch(r -> r.id().equals(id) && r.complete(partitions))) {
          out.printf("Re-snapshot %s is complete on all %d partitions.%n", id, partitions);
          out.flush();
          return 0;
        }
        if (!saidNoMember && noMemberRuns(wiring.leaseStore(), mongo.stream(), partitions)) {
          out.printf("No member of group %s runs (no partition's lease is held): the request waits until one"
              + " starts; waiting at most %s (--timeout).%n", listener, timeout);
          out.flush();
          saidNoMember = true;
        }
        if (System.nanoTime() - deadline >= 0) {
          out.printf("Re-snapshot %s is not complete after %s (--timeout); it stays requested and goes on whenever the"
              + " group's members run: see 'sluice snapshot --progress'.%n", id, timeout);
          out.flush();
          return 1; // the documented exit code of a command that did not do what it was asked
        }
        Thread.sleep(WAIT_POLL.toMillis());
      }
    }
  }

  private boolean noMemberRuns(LeaseStore leases, String stream, int partitions) {
    for (int i = 0; i < partitions; i++) {
      if (leases.read(ListenerConfig.leaseName(listener, stream, i, partitions)).filter(LeaseRecord::isHeld).isPresent()) {
        return false;
      }
    }
    return true;
  }

  /** {@link #idValue}, with a malformed extended-JSON value a usage error naming the option. */
  private BsonValue idOption(String option, String text) {
    try {
      return idValue(text);
    } catch (RuntimeException e) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(), option + " " + text
          + " is not a valid _id: " + dev.sluice.app.cli.Messages.oneLine(e));
    }
  }

  /** Compares two ids of the same BSON type that have an order (numbers, strings, ObjectIds, dates); else 0. */
  static int compareSameType(BsonValue a, BsonValue b) {
    if (a.isNumber() && b.isNumber()) {
      return a.asNumber().decimal128Value().bigDecimalValue().compareTo(b.asNumber().decimal128Value().bigDecimalValue());
    }
    if (a.isString() && b.isString()) {
      return a.asString().getValue().compareTo(b.asString().getValue());
    }
    if (a.isObjectId() && b.isObjectId()) {
      return a.asObjectId().getValue().compareTo(b.asObjectId().getValue());
    }
    if (a.isDateTime() && b.isDateTime()) {
      return Long.compare(a.asDateTime().getValue(), b.asDateTime().getValue());
    }
    return 0;
  }

  /** An {@code _id} given on the command line: extended JSON, or else a string. */
  static BsonValue idValue(String text) {
    try {
      return BsonDocument.parse("{\"v\": " + text + "}").get("v");
    } catch (JsonParseException | org.bson.BsonInvalidOperationException e) {
      return new BsonString(text);
    }
  }

  /** One line per request and partition: done (when), reading (where), or waiting. */
  static String table(List<SnapshotRequest> requests, LeaseStore leases, String stream, int partitions) {
    if (requests.isEmpty()) {
      return "No re-snapshot requests.\n";
    }
    String row = "%-26s %-30s %-9s %s%n";
    StringBuilder out = new StringBuilder(String.format(row, "REQUEST", "RANGE", "PARTITION", "PROGRESS"));
    for (SnapshotRequest r : requests) {
      int done = 0;
      for (int i = 0; i < partitions; i++) {
        PartitionSpec p = new PartitionSpec(i, partitions);
        String progress;
        if (r.doneBy(p)) {
          done++;
          progress = "done " + r.done().get(SnapshotRequest.partitionKey(p));
        } else {
          Optional<LeaseRecord> lease = leases.read(ListenerConfig.leaseName(r.group(), stream, i, partitions));
          progress = lease.flatMap(l -> r.readingAt(l.checkpoint())).map(at -> "reading, " + at)
              .orElse(lease.isEmpty() ? "waiting (the partition has not run yet)" : "waiting");
        }
        out.append(String.format(row, r.id(), abbreviate(r.range()), i + "/" + partitions, progress));
      }
      out.append(String.format("%-26s %d of %d partitions done%n", "", done, partitions));
    }
    return out.toString();
  }

  private static String abbreviate(String s) {
    return s.length() <= 30 ? s : s.substring(0, 27) + "...";
  }
}
