package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.bson.Document;

/**
 * A writer of per-key sequence numbers (seq 1 inserts the document or row, later ones set {@code seq}),
 * and the read-back of a topic the connector wrote, as the sequence numbers per key in topic order.
 */
final class KeyedWrites {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Where the writes go: a first write inserts the key's row or document, later ones set its seq. */
  interface Store {
    void insert(String key, int seq);

    void update(String key, int seq);
  }

  private final Store store;
  private final int keys;
  private final int[] next;

  KeyedWrites(MongoCollection<Document> collection, int keys) {
    this(new Store() {
      @Override
      public void insert(String key, int seq) {
        collection.insertOne(new Document("_id", key).append("seq", seq));
      }

      @Override
      public void update(String key, int seq) {
        collection.updateOne(Filters.eq("_id", key), Updates.set("seq", seq));
      }
    }, keys);
  }

  KeyedWrites(Store store, int keys) {
    this.store = store;
    this.keys = keys;
    this.next = new int[keys];
  }

  /**
   * Writes to PostgreSQL table {@code table} ({@code id text primary key, seq int}), one
   * autocommitted statement each.
   */
  static Store postgres(javax.sql.DataSource db, String table) {
    return new Store() {
      @Override
      public void insert(String key, int seq) {
        run("INSERT INTO " + table + " (id, seq) VALUES (?, ?)", key, seq);
      }

      @Override
      public void update(String key, int seq) {
        run("UPDATE " + table + " SET seq = ? WHERE id = ?", seq, key);
      }

      private void run(String sql, Object a, Object b) {
        try (java.sql.Connection c = db.getConnection(); java.sql.PreparedStatement s = c.prepareStatement(sql)) {
          s.setObject(1, a);
          s.setObject(2, b);
          if (s.executeUpdate() != 1) {
            throw new IllegalStateException(sql + " changed no row");
          }
        } catch (java.sql.SQLException e) {
          throw new IllegalStateException(sql + ": " + e.getMessage(), e);
        }
      }
    };
  }

  /** One change for every key. */
  void round() {
    for (int k = 0; k < keys; k++) {
      int seq = ++next[k];
      if (seq == 1) {
        store.insert("k" + k, seq);
      } else {
        store.update("k" + k, seq);
      }
    }
  }

  /** Writes rounds on a thread of its own until stopped; see {@link #startWriting}. */
  final class Writer {
    private final AtomicBoolean writing = new AtomicBoolean(true);
    private final AtomicReference<Throwable> failed = new AtomicReference<>();
    private final Thread thread = new Thread(() -> {
      try {
        while (writing.get()) {
          round();
          LockSupport.parkNanos(Duration.ofMillis(25).toNanos()); // pacing
        }
      } catch (Throwable t) {
        failed.set(t);
      }
    }, "writer");

    /** Stops after the round in progress; fails if a round failed. */
    void stop() throws InterruptedException {
      writing.set(false);
      thread.join();
      if (failed.get() != null) {
        throw new AssertionError("the writer failed", failed.get());
      }
    }
  }

  /** A round every 25 ms (pacing, not synchronisation) until {@link Writer#stop}. */
  Writer startWriting() {
    Writer w = new Writer();
    w.thread.start();
    return w;
  }

  /** How many changes {@code read} holds. */
  static int count(Map<String, List<Integer>> read) {
    return read.values().stream().mapToInt(List::size).sum();
  }

  /** Changes written so far. */
  int written() {
    int n = 0;
    for (int s : next) {
      n += s;
    }
    return n;
  }

  /** The sequence numbers per key in {@code topic}, read with read_committed, in offset order per partition. */
  static Map<String, List<Integer>> read(String bootstrap, String topic) {
    Map<String, List<Integer>> out = new HashMap<>();
    for (ConsumerRecord<String, String> r : readAll(bootstrap, topic)) {
      out.computeIfAbsent(written(r.key()), k -> new ArrayList<>()).add(seqOf(r.value()));
    }
    return out;
  }

  private static final java.util.regex.Pattern PG_KEY = java.util.regex.Pattern.compile("[^\\[\"]+\\[\"([^\"]*)\"\\]");

  /**
   * The key a round wrote: a MongoDB record key is the {@code _id} itself, a PostgreSQL one is
   * qualified by its table ({@code public.orders["k3"]}, ADR 0093).
   */
  static String written(String recordKey) {
    java.util.regex.Matcher m = recordKey == null ? null : PG_KEY.matcher(recordKey);
    return m != null && m.matches() ? m.group(1) : recordKey;
  }

  /** The record keys of {@code topic} (read_committed), in offset order per partition. */
  static List<String> keys(String bootstrap, String topic) {
    List<String> out = new ArrayList<>();
    readAll(bootstrap, topic).forEach(r -> out.add(r.key()));
    return out;
  }

  /** The values of {@code topic} (read_committed) as JSON, in offset order per partition. */
  static List<JsonNode> values(String bootstrap, String topic) {
    List<JsonNode> out = new ArrayList<>();
    for (ConsumerRecord<String, String> r : readAll(bootstrap, topic)) {
      try {
        out.add(JSON.readTree(r.value()));
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }
    return out;
  }

  /**
   * Every record of {@code topic} up to its end offsets, read with read_committed (so with
   * exactly-once only committed transactions), in offset order per partition; none if the topic
   * does not exist yet.
   */
  private static List<ConsumerRecord<String, String>> readAll(String bootstrap, String topic) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
      return dev.sluice.testkit.kafka.EmbeddedKafka.readToEnd(c, topic, Duration.ofSeconds(30));
    }
  }

  /** The seq a change record's value (Struct as schemaless JSON) carries. */
  static int seqOf(String value) {
    try {
      JsonNode v = JSON.readTree(value);
      if (v.has("payload")) {
        v = v.get("payload"); // JSON converter with schemas
      }
      // MongoDB updates: the changed fields (the looked-up document may be later); PostgreSQL
      // carries the row as the change left it, and no changed fields.
      boolean changedFields = !v.path("operation").asText().equals("INSERT") && v.path("changedFields").isTextual();
      String doc = changedFields ? v.path("changedFields").asText() : v.path("document").asText();
      return JSON.readTree(doc).path("seq").asInt();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Every key's 1..written, each once, in order. */
  void assertExactlyOnceInOrder(Map<String, List<Integer>> read) {
    assertThat(read).hasSize(keys);
    for (int k = 0; k < keys; k++) {
      List<Integer> expected = new ArrayList<>();
      for (int s = 1; s <= next[k]; s++) {
        expected.add(s);
      }
      assertThat(read.get("k" + k)).as("key k%d", k).containsExactlyElementsOf(expected);
    }
  }

  /**
   * Every key's 1..written at least once; duplicates only as replays of a suffix: the first
   * occurrences are in order.
   */
  void assertNothingLostInOrder(Map<String, List<Integer>> read) {
    assertThat(read).hasSize(keys);
    for (int k = 0; k < keys; k++) {
      int max = 0;
      for (int s : read.get("k" + k)) {
        if (s > max) {
          assertThat(s).as("key k%d: a new sequence number must be the next one (nothing skipped)", k)
              .isEqualTo(max + 1);
          max = s;
        }
      }
      assertThat(max).as("key k%d: last sequence number", k).isEqualTo(next[k]);
    }
  }

  /**
   * What a read_committed reader sees at any moment: per key, 1..n for some n no higher than was
   * written, each once (no duplicate, no gap, nothing the source has not written).
   */
  void assertNothingSkippedNorDuplicated(Map<String, List<Integer>> read) {
    read.forEach((key, seqs) -> {
      int k = Integer.parseInt(key.substring(1));
      for (int i = 0; i < seqs.size(); i++) {
        assertThat(seqs.get(i)).as("key %s, record %d of %s", key, i, seqs).isEqualTo(i + 1);
      }
      // next only grows, and was read after the topic: a bound for what the topic held then
      assertThat(seqs.size()).as("key %s: not more than written", key).isLessThanOrEqualTo(next[k]);
    });
  }

  /** Whether every key's last written seq is in {@code read}. */
  boolean complete(Map<String, List<Integer>> read) {
    for (int k = 0; k < keys; k++) {
      List<Integer> seqs = read.get("k" + k);
      if (seqs == null || !seqs.contains(next[k])) {
        return false;
      }
    }
    return true;
  }
}
