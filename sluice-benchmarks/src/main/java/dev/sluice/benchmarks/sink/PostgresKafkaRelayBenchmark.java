package dev.sluice.benchmarks.sink;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.Jdbc;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import org.postgresql.ds.PGSimpleDataSource;
import org.postgresql.replication.PGReplicationStream;

/**
 * Changes per second relayed from a PostgreSQL table to Kafka, end to end: the clock stops when
 * the listener has committed checkpoints covering every change, which it only does after Kafka
 * acknowledged them ({@code acks=all}). One real PostgreSQL 17 and one Kafka broker (embedded);
 * per round, a slot per variant is created, then the rows are inserted (transactions of 1,000), so
 * every variant reads the same backlog:
 *
 * <ol>
 *   <li>raw slot read: pgjdbc's replication stream, pgoutput inserts counted, nothing decoded;
 *   <li>relay, checkpoint after every change (each change waits for its ack and a commit);
 *   <li>relay, checkpoints every 1,000 changes or 1 s.
 * </ol>
 *
 * <p>Arguments: changes (default 20000), rounds (default 3). Results: {@code docs/benchmarks.md}.
 */
public final class PostgresKafkaRelayBenchmark {
  private PostgresKafkaRelayBenchmark() {}

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    String[] names = {"raw slot read, no processing", "relay, checkpoint every change",
        "relay, checkpoint every 1,000 changes or 1 s"};
    double[] best = new double[names.length];
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start(); EmbeddedKafka kafka = EmbeddedKafka.start()) {
      String db = pg.createDatabase("relay");
      String url = pg.jdbcUrl(db);
      Jdbc.execute(url, "CREATE TABLE orders (id bigint PRIMARY KEY, n int, amount numeric(12,2), note text)",
          "CREATE PUBLICATION pub FOR TABLE orders");
      long next = 0;
      for (int r = 1; r <= rounds; r++) {
        String raw = "raw_" + r;
        PostgresChangeFeed perChange = feed(url, "per_change_" + r);
        PostgresChangeFeed batched = feed(url, "batched_" + r);
        Jdbc.execute(url, "SELECT pg_create_logical_replication_slot('" + raw + "', 'pgoutput')");
        perChange.forGroup("relay").open(dev.sluice.feed.PartitionSpec.single(), dev.sluice.feed.StartPoint.latest()).close();
        batched.forGroup("relay").open(dev.sluice.feed.PartitionSpec.single(), dev.sluice.feed.StartPoint.latest()).close();
        for (long at = next; at < next + changes; at += 1000) {
          Jdbc.execute(url,
              "INSERT INTO orders SELECT g, g % 1000, (g % 100000) / 100.0, 'a note of some length, row ' || g"
              + " FROM generate_series(" + at + ", " + Math.min(at + 999, next + changes - 1) + ") g");
        }
        next += changes;
        double[] x = {
          rawRead(url, raw, changes),
          relay(kafka, url, perChange, "pg-per-change-" + r, changes, CheckpointPolicy.everyChange()),
          relay(kafka, url, batched, "pg-batched-" + r, changes, CheckpointPolicy.every(1000, Duration.ofSeconds(1)))
        };
        StringBuilder line = new StringBuilder("round " + r + ":");
        for (int i = 0; i < x.length; i++) {
          best[i] = Math.max(best[i], x[i]);
          line.append(String.format(" %.0f/s", x[i]));
        }
        System.out.println(line);
        Jdbc.execute(url, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active");
      }
    }
    System.out.printf("%nchanges=%d, best of %d rounds, ratio to the raw slot read%n", changes, rounds);
    for (int i = 0; i < names.length; i++) {
      System.out.printf("%-46s %8.0f changes/s  ratio %.3f%n", names[i], best[i], best[i] / best[0]);
    }
    System.out.printf("batched / per-change: ratio %.1f%n", best[2] / best[1]);
    System.exit(0);
  }

  private static PostgresChangeFeed feed(String url, String stream) {
    return PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders")
        .stream(stream).build();
  }

  private static double rawRead(String url, String slot, int changes) throws SQLException {
    long start = System.nanoTime();
    try (Connection c = Jdbc.replicationConnection(url)) {
      PGReplicationStream stream = Jdbc.pgoutput(c, slot, "pub");
      int inserts = 0;
      while (inserts < changes) {
        ByteBuffer m = stream.read();
        if (m.get(m.position()) == (byte) 'I') {
          inserts++;
        }
      }
      stream.close();
    }
    return changes / ((System.nanoTime() - start) / 1e9);
  }

  private static double relay(EmbeddedKafka kafka, String url, PostgresChangeFeed feed, String topic, int changes,
      CheckpointPolicy policy) throws InterruptedException {
    kafka.createTopic(topic, 3);
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setUrl(url);
    CommitCounter committed = new CommitCounter(changes);
    try (KafkaSink<Map<String, Object>> sink = KafkaSink.builder(kafka.bootstrapServers(), topic,
        MessageEncoder.builder(PostgresDocuments.mapper()).build()).build()) {
      long start = System.nanoTime();
      try (Listener<Map<String, Object>> l = Listener.builder(feed, SqlLeaseStore.builder(ds).build())
          .group("relay")
          .bootstrap(BootstrapPolicy.oldest())
          .checkpoint(policy)
          .handler(sink)
          .observer(committed)
          .build().start()) {
        committed.awaitAll();
        return changes / ((System.nanoTime() - start) / 1e9);
      }
    }
  }
}
