package dev.sluice.app;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** Prints the leases of a stream: owner, epoch, expiry and checkpoint of every partition. */
@Command(name = "status", mixinStandardHelpOptions = true,
    description = "Show who owns each partition of a stream, its epoch and checkpoint.")
public final class StatusCommand implements Callable<Integer> {

  @Option(names = "--mongo", required = true, description = "MongoDB connection string")
  String mongo;

  @Option(names = "--database", required = true, description = "database holding the lease collection")
  String database;

  @Option(names = "--leases", defaultValue = MongoLeaseStore.DEFAULT_COLLECTION,
      description = "lease collection (default: ${DEFAULT-VALUE})")
  String collection;

  @Option(names = "--stream", defaultValue = "", description = "stream name prefix, e.g. shop.orders")
  String stream;

  @Override
  public Integer call() {
    try (MongoClient client = MongoClients.create(mongo)) {
      LeaseStore store = MongoLeaseStore.builder(client.getDatabase(database)).collection(collection).build();
      List<LeaseRecord> records = store.list(stream);
      System.out.println(format(records));
      return 0;
    }
  }

  /**
   * A table of lease records, one line each: what the record is (a partition of a consumer group,
   * a group member, a lock, or a record from before consumer groups), its group, stream and
   * partition, and the owner's label (the part of the owner identity people gave).
   */
  public static String format(List<LeaseRecord> records) {
    String row = "%-9s %-20s %-24s %-9s %-16s %8s %-5s %-11s %s%n";
    StringBuilder out = new StringBuilder(String.format(row, "KIND", "GROUP", "STREAM", "PARTITION",
        "OWNER LABEL", "EPOCH", "HELD", "EXPIRES IN", "CHECKPOINT"));
    for (LeaseRecord r : records) {
      String[] n = describe(r.name());
      String expires = r.expiresAt() == null ? "-" : Duration.between(r.storeTime(), r.expiresAt()).toMillis() + " ms";
      out.append(String.format(row, n[0], n[1], n[2], n[3], r.owner() == null ? "-" : label(r.owner()),
          r.epoch(), r.isHeld() ? "yes" : "no", expires,
          r.checkpoint() == null ? "-" : abbreviate(r.checkpoint().toString())));
    }
    return out.toString();
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
