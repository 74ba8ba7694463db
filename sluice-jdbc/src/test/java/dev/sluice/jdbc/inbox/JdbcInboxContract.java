package dev.sluice.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Runs against each real database; subclasses provide the DataSource. */
abstract class JdbcInboxContract {
  private static final AtomicInteger TABLES = new AtomicInteger();

  protected abstract DataSource dataSource();

  private String table;
  private String effects;

  @BeforeEach
  void tables() throws Exception {
    int n = TABLES.incrementAndGet();
    table = "inbox_" + n;
    effects = "effects_" + n;
    try (Connection c = dataSource().getConnection(); Statement s = c.createStatement()) {
      // No unique key here on purpose: only the inbox may prevent a second effect.
      s.execute("CREATE TABLE " + effects + " (message_id VARCHAR(100) NOT NULL, consumer INT NOT NULL)");
    }
  }

  private JdbcInbox inbox(String group) {
    JdbcInbox inbox = JdbcInbox.builder(dataSource()).table(table).consumerGroup(group).build();
    inbox.createTable();
    return inbox;
  }

  @Test
  void concurrentConsumersApplyEachMessageExactlyOnce() throws Exception {
    int consumers = 4;
    int ids = 150;
    JdbcInbox inbox = inbox("billing");
    AtomicInteger duplicates = new AtomicInteger();
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(consumers);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int c = 0; c < consumers; c++) {
        int consumer = c;
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < ids; i++) {
          order.add(i);
        }
        Collections.shuffle(order, new Random(c));
        futures.add(pool.submit(() -> {
          go.await();
          for (int i : order) {
            String id = "evt-" + i;
            boolean ran = inbox.processIfNew(id, conn -> {
              try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + effects + " VALUES (?, ?)")) {
                ps.setString(1, id);
                ps.setInt(2, consumer);
                ps.executeUpdate();
              }
            });
            if (!ran) {
              duplicates.incrementAndGet();
            }
          }
          return null;
        }));
      }
      go.countDown();
      for (Future<?> f : futures) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(count("SELECT COUNT(*) FROM " + effects)).isEqualTo(ids);
    assertThat(count("SELECT COUNT(DISTINCT message_id) FROM " + effects)).isEqualTo(ids);
    assertThat(duplicates.get()).isEqualTo(ids * (consumers - 1));
  }

  @Test
  void aFailingWorkRollsBackItsWritesAndTheIdSoARedeliveryRetries() throws Exception {
    JdbcInbox inbox = inbox("billing");
    assertThatThrownBy(() -> inbox.processIfNew("e1", conn -> {
      try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + effects + " VALUES ('e1', 0)")) {
        ps.executeUpdate();
      }
      throw new IllegalStateException("payment provider down");
    }))
        .isInstanceOf(InboxException.class)
        .hasMessageContaining("e1")
        .hasMessageContaining("payment provider down");
    assertThat(inbox.processed("e1")).isFalse();
    assertThat(count("SELECT COUNT(*) FROM " + effects)).isZero();

    assertThat(inbox.processIfNew("e1", conn -> {})).isTrue();
    assertThat(inbox.processIfNew("e1", conn -> {})).isFalse();
  }

  @Test
  void groupsAreIndependentAndPurgeForgetsOldIds() {
    JdbcInbox billing = inbox("billing");
    JdbcInbox shipping = inbox("shipping");
    assertThat(billing.processIfNew("e1", conn -> {})).isTrue();
    assertThat(shipping.processIfNew("e1", conn -> {})).isTrue();

    JdbcInbox later =
        JdbcInbox.builder(dataSource()).table(table).consumerGroup("billing")
            .clock(Clock.fixed(Instant.now().plusSeconds(3600), ZoneOffset.UTC)).build();
    assertThat(later.processIfNew("e2", conn -> {})).isTrue();
    assertThat(billing.purgeProcessedBefore(Instant.now().plusSeconds(60))).isEqualTo(1);
    assertThat(billing.processed("e1")).isFalse();
    assertThat(billing.processed("e2")).isTrue();
    assertThat(shipping.processed("e1")).isTrue();
  }

  private long count(String sql) throws Exception {
    try (Connection c = dataSource().getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
