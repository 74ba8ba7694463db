package dev.sluice.app;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import java.util.List;
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

  /** A table of lease records, one line each. */
  public static String format(List<LeaseRecord> records) {
    StringBuilder out = new StringBuilder(String.format("%-32s %-28s %8s %-6s %-12s %s%n",
        "LEASE", "OWNER", "EPOCH", "HELD", "EXPIRES IN", "CHECKPOINT"));
    for (LeaseRecord r : records) {
      String expires = r.expiresAt() == null ? "-" : Duration.between(r.storeTime(), r.expiresAt()).toMillis() + " ms";
      out.append(String.format("%-32s %-28s %8d %-6s %-12s %s%n", r.name(), r.owner() == null ? "-" : r.owner(),
          r.epoch(), r.isHeld() ? "yes" : "no", expires, r.checkpoint() == null ? "-" : abbreviate(r.checkpoint().toString())));
    }
    return out.toString();
  }

  private static String abbreviate(String s) {
    return s.length() <= 60 ? s : s.substring(0, 28) + "..." + s.substring(s.length() - 28);
  }
}
