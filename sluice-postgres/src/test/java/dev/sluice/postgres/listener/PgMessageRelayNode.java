package dev.sluice.postgres.listener;

import static org.awaitility.Awaitility.await;

import dev.sluice.feed.Position;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Map;

/**
 * A relay of table {@code public.orders} and the logical-decoding messages of prefix {@code
 * outbox} to Kafka, in its own JVM, for crash tests (ADR 0096). Prints {@code READY} once its
 * partition has its slot and checkpoint, {@code DELIVERED <n>} and {@code COMMITTED <changes>}.
 *
 * <p>Arguments: JDBC URL, Kafka bootstrap servers, topic, checkpoint every N.
 */
public final class PgMessageRelayNode {
  private PgMessageRelayNode() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    KafkaSink<Map<String, Object>> sink = KafkaSink.builder(args[1], args[2],
            MessageEncoder.builder(PostgresDocuments.mapper()).build())
        .flushTimeout(Duration.ofSeconds(5))
        .build();
    Listener<Map<String, Object>> listener = Listener.builder(
            PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders")
                .messages("outbox").build(),
            SqlLeaseStore.builder(ListenerOnPostgresTest.simple(url)).build())
        .group("outbox-relay")
        .leaseDuration(Duration.ofSeconds(2))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(Integer.parseInt(args[3]), Duration.ofHours(1)))
        .handler(sink)
        .observer(new ListenerObserver() {
          private int delivered;

          @Override
          public void acquired(Lease lease) {
            System.out.println("ACQUIRED " + lease.epoch());
          }

          @Override
          public void delivered(dev.sluice.feed.ChangeEvent<?> event, long handlerNanos) {
            System.out.println("DELIVERED " + ++delivered);
          }

          @Override
          public void committed(String lease, long epoch, Position position, int changes) {
            System.out.println("COMMITTED " + changes);
          }
        })
        .build()
        .start();
    await().atMost(Duration.ofSeconds(60)).until(() -> listener.status().stream().allMatch(p -> p.committed() != null));
    System.out.println("READY");
    Thread.currentThread().join();
  }
}
