package dev.sluice.app.service;

import dev.sluice.app.service.config.ConfigException;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code sluice slots}: the replication slots Sluice made in the configuration's PostgreSQL
 * database (every group, stream and partition layout, named {@code sluice_<database>_...}), each
 * with the group, stream and partition whose lease record names it, the WAL it keeps on the server
 * ({@code pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)}), whether a reader holds it, and
 * whether a live lease uses it. With {@code --drop}, after a confirmation (or {@code --yes}), it
 * drops the slots that no live lease uses and no reader holds: a changed partition count or a
 * given-up group leaves its old slots keeping WAL for ever. The server refuses to drop a slot a
 * reader holds, so a slot taken between the listing and the drop is never dropped.
 */
@Command(name = "slots", mixinStandardHelpOptions = true,
    description = "List the PostgreSQL replication slots Sluice made (group, partition, WAL kept, in use), and"
        + " with --drop drop those no live lease uses.")
public final class SlotsCommand implements Callable<Integer> {
  private static final Pattern PARTITION = Pattern.compile("([^/]+)/([^#@]+)#([0-9]+)of([0-9]+)");

  @Option(names = "--config", required = true, description = "YAML configuration file with a postgres section")
  Path configFile;

  @Option(names = "--drop", description = "drop every listed slot that no live lease uses and no reader holds,"
      + " after a confirmation")
  boolean drop;

  @Option(names = "--yes", description = "with --drop: do not ask (for scripts)")
  boolean yes;

  @Spec CommandSpec spec;

  /** One listed slot: the server's figures and what the lease records say of it. */
  record Row(PostgresChangeFeed.SlotStats slot, String group, String stream, String partition, String lease,
      boolean checkpoint) {
    boolean droppable() {
      return !slot.active() && !lease.startsWith("live");
    }
  }

  @Override
  public Integer call() throws IOException {
    SluiceConfig c = ConfigLoader.load(configFile);
    if (c.postgres() == null) {
      throw new ConfigException("--config", configFile + " has no postgres section: replication slots are"
          + " PostgreSQL's");
    }
    PrintWriter out = spec.commandLine().getOut();
    try (Wiring<?> wiring = Wiring.connect(c, false)) {
      List<Row> rows = rows(c.postgres(), wiring.leaseStore());
      out.print(format(rows));
      out.flush();
      if (!drop) {
        return 0;
      }
      List<Row> droppable = rows.stream().filter(Row::droppable).toList();
      if (droppable.isEmpty()) {
        out.println("No slot to drop: every slot is held by a reader or used by a live lease.");
        out.flush();
        return 0;
      }
      out.println("Drop " + droppable.size() + " slot(s) no live lease uses: "
          + String.join(", ", droppable.stream().map(r -> r.slot().slot()).toList()) + ".");
      List<String> withCheckpoint = droppable.stream().filter(Row::checkpoint).map(r -> r.slot().slot()).toList();
      if (!withCheckpoint.isEmpty()) {
        out.println("Partitions with a checkpoint use " + String.join(", ", withCheckpoint) + ": if they run"
            + " again, their history is lost (onHistoryLost applies).");
      }
      if (!yes) {
        out.print("Drop them? [y/N] ");
        out.flush();
        String answer = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        if (answer == null || !answer.trim().toLowerCase(Locale.ROOT).matches("y|yes")) {
          out.println("Nothing dropped.");
          out.flush();
          return 0;
        }
      }
      PostgresChangeFeed feed = feed(c.postgres(), null);
      int failed = 0;
      for (Row r : droppable) {
        try {
          feed.dropSlot(r.slot().slot());
          out.println("dropped " + r.slot().slot() + " (kept " + bytes(r.slot().retainedBytes()) + ")");
        } catch (FeedException e) {
          failed++;
          out.println("not dropped " + r.slot().slot() + ": " + e.getMessage());
        }
        out.flush();
      }
      return failed == 0 ? 0 : 1;
    }
  }

  /** The slots of the configuration's prefix and database, matched to the lease records that name them. */
  static List<Row> rows(SluiceConfig.PostgresSection pg, LeaseStore leases) {
    Map<String, LeaseRecord> bySlot = new HashMap<>();
    Map<String, String[]> names = new HashMap<>();
    for (LeaseRecord r : leases.list("")) {
      Matcher m = PARTITION.matcher(r.name());
      if (!m.matches()) {
        continue;
      }
      PartitionSpec p = new PartitionSpec(Integer.parseInt(m.group(3)), Integer.parseInt(m.group(4)));
      String slot = feed(pg, m.group(2)).forGroup(m.group(1)).slotName(p);
      bySlot.put(slot, r);
      names.put(slot, new String[] {m.group(1), m.group(2), p.index() + "/" + p.count()});
    }
    List<Row> rows = new ArrayList<>();
    for (PostgresChangeFeed.SlotStats s : feed(pg, null).slotsOfPrefix()) {
      LeaseRecord r = bySlot.get(s.slot());
      String[] n = names.getOrDefault(s.slot(), new String[] {"-", "-", "-"});
      String lease = r == null ? "none" : r.isHeld() ? "live (" + StatusCommand.label(r.owner()) + ")" : "expired";
      rows.add(new Row(s, n[0], n[1], n[2], lease, r != null && r.checkpoint() != null));
    }
    return rows;
  }

  /** A feed of the configuration's database, for slot names ({@code stream} null: for listing). */
  private static PostgresChangeFeed feed(SluiceConfig.PostgresSection pg, String stream) {
    PostgresChangeFeed.Builder b = PostgresChangeFeed.builder(pg.url().trim(), pg.user(), pg.password(),
        pg.publication());
    return (stream == null ? b : b.stream(stream)).build();
  }

  static String format(List<Row> rows) {
    String row = "%-50s %-20s %-24s %-9s %12s %-6s %s%n";
    StringBuilder out = new StringBuilder(String.format(row, "SLOT", "GROUP", "STREAM", "PARTITION", "RETAINED WAL",
        "ACTIVE", "LEASE"));
    for (Row r : rows) {
      out.append(String.format(row, r.slot().slot(), r.group(), r.stream(), r.partition(),
          bytes(r.slot().retainedBytes()), r.slot().active() ? "yes" : "no", r.lease()));
    }
    if (rows.isEmpty()) {
      out.append("(no replication slot of this prefix in the database)\n");
    }
    return out.toString();
  }

  private static String bytes(long n) {
    return n < 1024 ? n + " B" : n < 1024 * 1024 ? n / 1024 + " KiB" : n / (1024 * 1024) + " MiB";
  }
}
