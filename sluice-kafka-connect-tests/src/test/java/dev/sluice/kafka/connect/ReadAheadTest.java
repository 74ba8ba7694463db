package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.Test;

/**
 * The task's reading thread (ADR 0129) on its own, with passes scripted by the test: the order
 * records are handed out in, the one-pass bound, failures after what was read before them, and
 * stopping a thread that waits for room. The connector's tests run it against real servers.
 */
class ReadAheadTest {
  /** A pass that hands out what the test puts in {@code passes}, one list a pass, in order. */
  private static final class ScriptedPass implements ReadAhead.Pass {
    final BlockingQueue<Object> passes = new LinkedBlockingQueue<>();
    final AtomicInteger read = new AtomicInteger();
    final AtomicInteger before = new AtomicInteger();

    @Override
    public void before() {
      before.incrementAndGet();
    }

    @Override
    public void read(List<SourceRecord> out, Duration wait) {
      Object next;
      try {
        next = passes.poll(wait.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      if (next instanceof RuntimeException e) {
        throw e;
      }
      if (next instanceof Error e) {
        throw e;
      }
      if (next instanceof List<?> records) {
        for (Object r : records) {
          out.add((SourceRecord) r);
        }
        read.addAndGet(records.size());
      }
    }

    @Override
    public int waiting() {
      return 1;
    }
  }

  private static List<SourceRecord> records(int from, int count) {
    List<SourceRecord> out = new ArrayList<>();
    for (int i = from; i < from + count; i++) {
      out.add(new SourceRecord(Map.of("p", 0), Map.of("o", i), "t", null, Schema.STRING_SCHEMA, "k" + i,
          Schema.INT32_SCHEMA, i));
    }
    return out;
  }

  private static List<Object> values(List<SourceRecord> records) {
    return records.stream().map(SourceRecord::value).toList();
  }

  @Test
  void handsOutEveryPassInOrderAndMergesWhatQueuedWhileNobodyTook() throws Exception {
    ScriptedPass pass = new ScriptedPass();
    try (ReadAhead readAhead = new ReadAhead("test-reader", pass, 100)) {
      readAhead.start();
      pass.passes.add(records(0, 3));
      pass.passes.add(records(3, 2));
      pass.passes.add(records(5, 4));
      await().atMost(Duration.ofSeconds(10)).until(() -> pass.read.get() == 9);
      List<SourceRecord> first = readAhead.take(Duration.ofSeconds(10));
      assertThat(values(first)).as("three passes queued, taken as one poll").containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8);
      assertThat(pass.before.get()).as("committed offsets confirmed before each pass").isGreaterThanOrEqualTo(3);

      pass.passes.add(records(9, 1));
      assertThat(values(readAhead.take(Duration.ofSeconds(10)))).containsExactly(9);
      assertThat(readAhead.take(Duration.ofMillis(50))).as("nothing read: null after the wait").isNull();
    }
  }

  @Test
  void readsAtMostOnePassAheadOfTheTask() throws Exception {
    ScriptedPass pass = new ScriptedPass();
    try (ReadAhead readAhead = new ReadAhead("test-reader", pass, 10)) {
      readAhead.start();
      for (int i = 0; i < 5; i++) {
        pass.passes.add(records(i * 10, 10));
      }
      // The first pass is queued; the second is read and waits for room: nothing more is read.
      await().atMost(Duration.ofSeconds(10)).until(() -> pass.read.get() == 20);
      assertThat(pass.passes).as("the thread waits for room, it does not read on").hasSize(3);
      assertThat(values(readAhead.take(Duration.ofSeconds(10)))).hasSize(10).startsWith(0).endsWith(9);
      await().atMost(Duration.ofSeconds(10)).until(() -> pass.read.get() == 30);
      assertThat(pass.passes).hasSize(2);
      List<Object> rest = new ArrayList<>();
      while (rest.size() < 40) {
        List<SourceRecord> batch = readAhead.take(Duration.ofSeconds(10));
        assertThat(batch).as("a pass of 10 never shares a poll with another at capacity 10").hasSize(10);
        rest.addAll(values(batch));
      }
      assertThat(rest).startsWith(10).endsWith(49).doesNotHaveDuplicates();
    }
  }

  @Test
  void aFailureIsThrownAfterThePassesReadBeforeIt() throws Exception {
    ScriptedPass pass = new ScriptedPass();
    try (ReadAhead readAhead = new ReadAhead("test-reader", pass, 100)) {
      readAhead.start();
      pass.passes.add(records(0, 2));
      pass.passes.add(new ConnectException("history lost, policy fail"));
      pass.passes.add(records(2, 2)); // never read: the thread ended with the failure
      await().atMost(Duration.ofSeconds(10)).until(() -> pass.passes.size() == 1);
      assertThat(values(readAhead.take(Duration.ofSeconds(10)))).containsExactly(0, 1);
      assertThatThrownBy(() -> readAhead.take(Duration.ofSeconds(10))).isInstanceOf(ConnectException.class)
          .hasMessage("history lost, policy fail");
      assertThatThrownBy(() -> readAhead.take(Duration.ZERO)).as("and again on the next poll")
          .hasMessage("history lost, policy fail");
      assertThat(pass.passes).hasSize(1);
    }
  }

  @Test
  void anErrorOnTheThreadFailsThePollNamingIt() throws Exception {
    ScriptedPass pass = new ScriptedPass();
    try (ReadAhead readAhead = new ReadAhead("test-reader", pass, 100)) {
      readAhead.start();
      pass.passes.add(new StackOverflowError("handler recursion"));
      assertThatThrownBy(() -> {
        while (true) {
          readAhead.take(Duration.ofSeconds(10));
        }
      }).isInstanceOf(ConnectException.class).hasMessageContaining("reading thread failed")
          .hasMessageContaining("handler recursion").hasCauseInstanceOf(StackOverflowError.class);
    }
  }

  @Test
  void closeEndsAThreadThatWaitsForRoomAndAPollThatWaits() throws Exception {
    ScriptedPass pass = new ScriptedPass();
    ReadAhead readAhead = new ReadAhead("test-reader-close", pass, 1);
    readAhead.start();
    pass.passes.add(records(0, 1));
    pass.passes.add(records(1, 1));
    await().atMost(Duration.ofSeconds(10)).until(() -> pass.read.get() == 2); // the second waits for room
    Thread thread = Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("test-reader-close")).findFirst().orElseThrow();
    readAhead.close();
    assertThat(thread.isAlive()).as("close waited for the thread").isFalse();
    assertThat(readAhead.take(Duration.ofSeconds(10))).as("a closed read-ahead hands out nothing").isNull();
  }

  @Test
  void refusesACapacityBelowOne() {
    assertThatThrownBy(() -> new ReadAhead("x", new ScriptedPass(), 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("capacity");
  }
}
