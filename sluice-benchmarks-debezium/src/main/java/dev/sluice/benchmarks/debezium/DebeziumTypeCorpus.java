package dev.sluice.benchmarks.debezium;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.Jdbc;
import dev.sluice.testkit.sql.PostgresTypeCorpus;
import dev.sluice.testkit.sql.PostgresTypeCorpus.Case;
import dev.sluice.testkit.sql.PostgresTypeCorpus.Group;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Issue 33: the type corpus of {@code PostgresTypeCorpusTest} ({@link PostgresTypeCorpus}, the same
 * tables and values) written on the test kit's PostgreSQL 17 and read by Debezium 3.6.1.Final's
 * PostgreSQL connector in its embedded engine: pgoutput, {@code snapshot.mode=no_data}, every
 * value setting at its default ({@code decimal.handling.mode=precise},
 * {@code time.precision.mode=adaptive}, {@code binary.handling.mode=bytes},
 * {@code interval.handling.mode=numeric}, {@code hstore}/{@code money} defaults), records
 * serialized by the engine's {@link Json} format, Kafka's {@code JsonConverter} with schemas (its
 * default, {@code schemas.enable=true}): the value each column of {@code after} carries, with the
 * field's Connect type and logical name.
 *
 * <p>Each case is an {@code INSERT} in a transaction of its own. Then an unchanged TOASTed column:
 * a row with a 6,400-character text, then an {@code UPDATE} of another column (the table's
 * replica identity is the default, its key).
 *
 * <p>If the engine stops on a value (its default {@code event.processing.failure.handling.mode}
 * is {@code fail}), the case is reported with the engine's error, and the cases after it are
 * written again after a new slot and read by a new engine, so one failure does not hide the rest.
 *
 * <pre>java -cp ... dev.sluice.benchmarks.debezium.DebeziumTypeCorpus</pre>
 */
public final class DebeziumTypeCorpus {
  private static final ObjectMapper JSON = new ObjectMapper();

  private DebeziumTypeCorpus() {}

  record Written(int id, String table, String column, String literal) {}

  public static void main(String[] args) throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("corpus");
      String url = pg.jdbcUrl(db);
      List<String> setup = new ArrayList<>(PostgresTypeCorpus.TYPES);
      StringBuilder tables = new StringBuilder();
      for (Group g : PostgresTypeCorpus.GROUPS) {
        setup.add(g.createTable());
        tables.append(g.table()).append(", ");
      }
      setup.add("CREATE TABLE c_toast (id int PRIMARY KEY, big text, n int)");
      setup.add("CREATE PUBLICATION pub FOR TABLE " + tables + "c_toast");
      Jdbc.execute(url, setup);

      List<Written> pending = new ArrayList<>();
      int id = 0;
      for (Group g : PostgresTypeCorpus.GROUPS) {
        for (Case k : g.cases()) {
          pending.add(new Written(++id, g.table(), k.column(), k.literal()));
        }
      }
      Map<Integer, String> results = new LinkedHashMap<>();
      int attempt = 0;
      int nextId = 0;
      List<String> toast = List.of();
      while (!pending.isEmpty()) {
        String slot = "dbz_corpus_" + attempt++;
        Jdbc.execute(url, "SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
        // Fresh ids on each attempt, so a case written again is a new row.
        List<Written> written = new ArrayList<>();
        for (Written w : pending) {
          written.add(new Written(++nextId, w.table(), w.column(), w.literal()));
        }
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
          for (Written w : written) {
            s.execute("INSERT INTO " + w.table() + " (id, " + w.column() + ") VALUES (" + w.id() + ", "
                + w.literal() + ")");
          }
          if (attempt == 1) {
            s.execute("INSERT INTO c_toast VALUES (1, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g), 0)");
            s.execute("UPDATE c_toast SET n = 1 WHERE id = 1");
          }
        }
        int expected = written.size() + (attempt == 1 ? 2 : 0);
        Map<String, JsonNode> got = new ConcurrentHashMap<>();
        List<JsonNode> toastEvents = new ArrayList<>();
        AtomicReference<String> failure = new AtomicReference<>();
        read(pg.port(), db, slot, expected, got, toastEvents, failure);
        pending = new ArrayList<>();
        boolean failedOne = false;
        for (Written w : written) {
          JsonNode e = got.get(w.table() + "/" + w.id());
          String label = w.table() + "." + w.column() + " = " + w.literal();
          if (e != null) {
            results.put(results.size(), "OK    " + label + "  ->  " + describe(e, w.column()));
          } else if (!failedOne) {
            failedOne = true;
            results.put(results.size(), "FAIL  " + label + "  ->  no record; the engine stopped: " + failure.get());
          } else {
            pending.add(w);
          }
        }
        if (!toastEvents.isEmpty()) {
          List<String> t = new ArrayList<>();
          for (JsonNode e : toastEvents) {
            JsonNode after = e.path("payload").path("after");
            String big = after.path("big").asText();
            t.add("op " + e.path("payload").path("op").asText() + ": big = "
                + (big.length() > 40 ? big.substring(0, 12) + "... (" + big.length() + " chars)" : "\"" + big + "\"")
                + ", n = " + after.path("n") + ", before = " + e.path("payload").path("before"));
          }
          toast = t;
        }
        if (pending.isEmpty() && failure.get() != null && !failedOne) {
          System.out.println("engine error after all records: " + failure.get());
        }
      }
      System.out.println();
      System.out.println("Debezium 3.6.1.Final, PostgreSQL connector (pgoutput), default value settings, JsonConverter"
          + " with schemas; PostgreSQL " + Jdbc.queryOne(url, "SHOW server_version"));
      System.out.println("value of after.<column>  [Connect type / logical name (parameters)]");
      results.values().forEach(System.out::println);
      System.out.println("Unchanged TOASTed column (c_toast.big, 6,400 characters; UPDATE of n only):");
      toast.forEach(t -> System.out.println("  " + t));
    }
    System.exit(0);
  }

  /** The column's value in {@code after}, and its schema field. */
  private static String describe(JsonNode event, String column) {
    JsonNode value = event.path("payload").path("after").get(column);
    JsonNode field = null;
    for (JsonNode f : event.path("schema").path("fields")) {
      if (f.path("field").asText().equals("after")) {
        for (JsonNode cf : f.path("fields")) {
          if (cf.path("field").asText().equals(column)) {
            field = cf;
          }
        }
      }
    }
    StringBuilder s = new StringBuilder(String.valueOf(value));
    if (field != null) {
      s.append("  [").append(field.path("type").asText());
      if (field.has("name")) {
        s.append(" / ").append(field.path("name").asText());
      }
      if (field.has("parameters")) {
        s.append(" ").append(field.path("parameters"));
      }
      s.append(']');
    } else {
      s.append("  [no schema field]");
    }
    return s.toString();
  }

  private static void read(int port, String db, String slot, int expected, Map<String, JsonNode> got,
      List<JsonNode> toastEvents, AtomicReference<String> failure) throws Exception {
    Properties p = DebeziumConfig.embedded("corpus-" + slot, port, db, "corpus", slot, "pub");
    p.setProperty("converter.schemas.enable", "true");
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.atomic.AtomicInteger seen = new java.util.concurrent.atomic.AtomicInteger();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    try (DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
        .using(p)
        .using((success, message, error) -> {
          if (!success || error != null) {
            failure.compareAndSet(null, message + (error == null ? "" : " / " + rootCause(error)));
          }
          done.countDown();
        })
        .notifying(record -> {
          if (record.value() == null) {
            return; // a tombstone
          }
          try {
            JsonNode v = JSON.readTree(record.value());
            String table = v.path("payload").path("source").path("table").asText();
            if (table.equals("c_toast")) {
              synchronized (toastEvents) {
                toastEvents.add(v);
              }
            } else {
              got.put(table + "/" + v.path("payload").path("after").path("id").asInt(), v);
            }
          } catch (java.io.IOException e) {
            failure.compareAndSet(null, "unreadable JSON: " + e);
          }
          if (seen.incrementAndGet() == expected) {
            done.countDown();
          }
        })
        .build()) {
      executor.execute(engine);
      // Done when every record came or the engine stopped; a value Debezium leaves out without
      // stopping shows as 30 s with no further record.
      int last = -1;
      long since = System.nanoTime();
      while (!done.await(1, TimeUnit.SECONDS)) {
        if (seen.get() != last) {
          last = seen.get();
          since = System.nanoTime();
        } else if (System.nanoTime() - since > TimeUnit.SECONDS.toNanos(30)) {
          failure.compareAndSet(null, "no further record within 30 s (" + seen.get() + " of " + expected + ")");
          break;
        }
      }
    } finally {
      executor.shutdown();
      executor.awaitTermination(1, TimeUnit.MINUTES);
    }
  }

  private static String rootCause(Throwable e) {
    Throwable t = e;
    StringBuilder s = new StringBuilder(e.toString());
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
      s.append(" <- ").append(t);
    }
    return s.toString();
  }


}
