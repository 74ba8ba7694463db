package dev.sluice.testkit.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.Listener;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite every change feed passes (MongoDB, PostgreSQL), against a real server:
 * positions that resume exactly at every change (inside multi-write units too, and after being
 * acknowledged), commit order within and across units, the bootstrap kinds (latest, oldest, and a
 * snapshot where the feed supports one, refused by the feed and the listener builder where not),
 * lost history reported as such, and partitions that split the keys.
 *
 * <p>Subclasses give a {@link Source}: a fresh stream per test (a collection, a table in a
 * publication) and the means to write to it.
 *
 * @param <D> the feed's document type
 */
public abstract class ChangeFeedContract<D> extends SourceContract<D> {
  private static final Duration POLL = Duration.ofMillis(100);
  private static final Duration PATIENCE = Duration.ofSeconds(30);

  /** A write: {@code key} set to {@code version}, or deleted when {@code version} is null. */
  public record Write(String key, Long version) {
    public static Write set(String key, long version) {
      return new Write(key, version);
    }

    public static Write delete(String key) {
      return new Write(key, null);
    }
  }

  /** A fresh stream of the feed under test, and the means to write to it. */
  public interface Source<D> extends AutoCloseable {
    /** The feed of this stream. */
    ChangeFeed<D> feed();

    /** Commits {@code writes} in order, as one unit where the source has transactions. */
    void write(List<Write> writes);

    /** The version a change's document carries (null when it has none, as a delete). */
    Long version(ChangeEvent<D> change);

    /**
     * The key a change's {@link Write} named: by default the change's key itself; a feed whose keys
     * name more (PostgreSQL qualifies them by table, ADR 0093) checks its form and gives the part
     * that was written.
     */
    default String writtenKey(ChangeEvent<D> change) {
      return change.key();
    }

    /**
     * Makes the source forget the changes up to and including {@code change}, as when history
     * rolls off (MongoDB: the oplog is trimmed; PostgreSQL: the slot is gone).
     */
    void forgetThrough(ChangeEvent<D> change);

    /** A lease store the listener builder check can use (not written to). */
    LeaseStore leaseStore();

    @Override
    void close();
  }

  /**
   * A fresh stream whose history {@link Source#forgetThrough} can cut (it may need a server of its
   * own, as an oplog is trimmed for every stream on it).
   */
  protected Source<D> newSourceWithForgettableHistory() {
    return newSource();
  }

  private FeedCursor<D> open(Source<D> s, PartitionSpec partition, StartPoint start) {
    FeedCursor<D> c = s.feed().open(partition, start);
    closeAfter(c);
    return c;
  }

  /** Polls until {@code done} holds for what arrived (or fails after 30 s); returns what arrived. */
  private static <D> List<ChangeEvent<D>> readUntil(FeedCursor<D> c, Predicate<List<ChangeEvent<D>>> done) {
    List<ChangeEvent<D>> out = new ArrayList<>();
    long deadline = System.nanoTime() + PATIENCE.toNanos();
    while (!done.test(out) && System.nanoTime() < deadline) {
      out.addAll(c.poll(POLL));
    }
    assertThat(done.test(out)).as("changes arrived in time: %s", out).isTrue();
    return out;
  }

  private static <D> List<ChangeEvent<D>> read(FeedCursor<D> c, int count) {
    List<ChangeEvent<D>> out = readUntil(c, l -> l.size() >= count);
    assertThat(out).hasSize(count);
    return out;
  }

  private List<String> described(Source<D> s, List<ChangeEvent<D>> events) {
    List<String> out = new ArrayList<>();
    for (ChangeEvent<D> e : events) {
      Long v = s.version(e);
      out.add(s.writtenKey(e) + (e.operation() == Operation.DELETE ? ":deleted" : "=" + v));
    }
    return out;
  }

  private static final List<List<Write>> UNITS = List.of(
      List.of(Write.set("a", 1)),
      List.of(Write.set("b", 2), Write.set("c", 3), Write.set("a", 4)),
      List.of(Write.set("d", 5)),
      List.of(Write.delete("b")),
      List.of(Write.set("e", 6), Write.delete("c"), Write.set("b", 7)),
      List.of(Write.set("a", 8)));

  private static final List<String> IN_ORDER =
      List.of("a=1", "b=2", "c=3", "a=4", "d=5", "b:deleted", "e=6", "c:deleted", "b=7", "a=8");

  @Test
  public void changesArriveInCommitOrderWithinAndAcrossUnits() {
    Source<D> s = source();
    FeedCursor<D> c = open(s, PartitionSpec.single(), StartPoint.latest());
    UNITS.forEach(s::write);
    List<ChangeEvent<D>> events = read(c, IN_ORDER.size());
    assertThat(described(s, events)).containsExactlyElementsOf(IN_ORDER);
    assertThat(events).extracting(ChangeEvent::id).doesNotHaveDuplicates();
    assertThat(events).extracting(ChangeEvent::stream).containsOnly(s.feed().stream());
  }

  @Test
  public void resumingAfterEveryAcknowledgedPositionDeliversExactlyTheRest() {
    Source<D> s = source();
    List<Position> positions = new ArrayList<>();
    List<ChangeEvent<D>> all;
    try (FeedCursor<D> c = s.feed().open(PartitionSpec.single(), StartPoint.latest())) {
      positions.add(c.position());
      UNITS.forEach(s::write);
      all = read(c, IN_ORDER.size());
    }
    all.forEach(e -> positions.add(e.position()));
    assertResumesExactlyAfterEach(s, positions, all);
  }

  /**
   * Opens the feed after each of {@code positions} (the start, then each change's) and checks that
   * exactly the rest of {@code all} arrives, then nothing; acknowledges each position, as the
   * engine acknowledges what it commits.
   */
  private void assertResumesExactlyAfterEach(Source<D> s, List<Position> positions, List<ChangeEvent<D>> all) {
    for (int i = 0; i < positions.size(); i++) {
      try (FeedCursor<D> c = s.feed().open(PartitionSpec.single(), StartPoint.after(positions.get(i)))) {
        List<ChangeEvent<D>> rest = read(c, all.size() - i);
        assertThat(rest).as("resumed after change %d of %d (%s)", i, all.size(), positions.get(i))
            .extracting(ChangeEvent::id)
            .containsExactlyElementsOf(all.subList(i, all.size()).stream().map(ChangeEvent::id).toList());
        assertThat(c.poll(POLL)).as("nothing more after change %d", i).isEmpty();
        // What the engine commits is acknowledged: the source may let go of what came before.
        c.acknowledge(positions.get(i));
      }
    }
  }

  @Test
  public void latestDeliversOnlyWhatIsCommittedAfterTheCursorOpened() {
    Source<D> s = source();
    s.write(List.of(Write.set("before", 1)));
    FeedCursor<D> c = open(s, PartitionSpec.single(), StartPoint.latest());
    s.write(List.of(Write.set("after", 2)));
    List<ChangeEvent<D>> events = readUntil(c, l -> l.stream().anyMatch(e -> s.writtenKey(e).equals("after")));
    assertThat(described(s, events)).containsExactly("after=2");
  }

  @Test
  public void oldestDeliversWhatTheSourceStillRetainsForThisReader() {
    Source<D> s = source();
    try (FeedCursor<D> first = s.feed().open(PartitionSpec.single(), StartPoint.oldest())) {
      assertThat(first.position()).isNotNull();
    }
    s.write(List.of(Write.set("x", 1), Write.set("y", 2)));
    FeedCursor<D> c = open(s, PartitionSpec.single(), StartPoint.oldest());
    List<ChangeEvent<D>> events = readUntil(c, l -> l.stream().anyMatch(e -> s.writtenKey(e).equals("y")));
    assertThat(described(s, events)).as("written while no cursor was open").endsWith("x=1", "y=2");
  }

  /**
   * What a snapshot bootstrap promises on every feed: each existing row as a SNAPSHOT change, and
   * every change not already in what was read, in commit order. A feed may read the rows in one
   * snapshot first (PostgreSQL) or while it streams (MongoDB, where a row read in a state later
   * than the cursor's opening, or changed while it was read, may come as its changes instead). No
   * key ever goes back to an older state and no state is delivered twice, so a consumer applying
   * the changes in order ends equal to the source and never regresses.
   */
  @Test
  public void aSnapshotBootstrapDeliversTheExistingRowsThenLaterChangesOrIsRefusedEverywhere() {
    Source<D> s = source();
    s.write(List.of(Write.set("k1", 1), Write.set("k2", 2), Write.set("k3", 3)));
    s.write(List.of(Write.delete("k2")));
    if (!s.feed().supports(StartPoint.snapshot())) {
      assertThatThrownBy(() -> s.feed().open(PartitionSpec.single(), StartPoint.snapshot()))
          .isInstanceOf(FeedException.class).hasMessageContaining("snapshot");
      assertThatThrownBy(() -> Listener.builder(s.feed(), s.leaseStore()).group("contract")
          .bootstrap(BootstrapPolicy.snapshot()).handler((change, fence) -> {}).build())
          .isInstanceOf(ConfigurationException.class).hasMessageContaining("not supported");
      return;
    }
    FeedCursor<D> c = open(s, PartitionSpec.single(), StartPoint.snapshot());
    // After the snapshot's start, before or while it is read.
    s.write(List.of(Write.set("k1", 4), Write.set("k4", 5)));
    List<ChangeEvent<D>> events = readUntil(c,
        l -> folded(s, l).equals(Map.of("k1", 4L, "k3", 3L, "k4", 5L)));
    // Once the snapshot is read: an ordinary change.
    s.write(List.of(Write.set("k3", 6)));
    events.addAll(readUntil(c, l -> l.stream().anyMatch(e -> s.writtenKey(e).equals("k3") && Long.valueOf(6).equals(s.version(e)))));
    assertThat(c.poll(POLL)).as("nothing more").isEmpty();

    List<ChangeEvent<D>> snapshot = events.stream().filter(e -> e.operation() == Operation.SNAPSHOT).toList();
    assertThat(snapshot).extracting(s::writtenKey).contains("k3").doesNotContain("k2");
    assertThat(described(s, events)).endsWith("k3=6");
    assertThat(events.get(events.size() - 1).operation()).isNotEqualTo(Operation.SNAPSHOT);
    assertNoKeyGoesBack(s, events);
    assertThat(folded(s, events)).isEqualTo(Map.of("k1", 4L, "k3", 6L, "k4", 5L));
    assertThat(events).extracting(ChangeEvent::id).doesNotHaveDuplicates();
  }

  @Test
  public void aSnapshotResumedAfterAnyPositionItHandedOutDeliversExactlyTheRest() {
    Source<D> s = source();
    s.write(List.of(Write.set("r1", 1), Write.set("r2", 2), Write.set("r3", 3), Write.set("r4", 4),
        Write.set("r5", 5)));
    s.write(List.of(Write.delete("r2")));
    if (!s.feed().supports(StartPoint.snapshot())) {
      assertThatThrownBy(() -> s.feed().open(PartitionSpec.single(), StartPoint.snapshot()))
          .isInstanceOf(FeedException.class).hasMessageContaining("snapshot");
      return;
    }
    List<Position> positions = new ArrayList<>();
    List<ChangeEvent<D>> all;
    try (FeedCursor<D> c = s.feed().open(PartitionSpec.single(), StartPoint.snapshot())) {
      positions.add(c.position());
      all = read(c, 4);
      assertThat(c.poll(POLL)).isEmpty();
    }
    assertThat(described(s, all)).containsExactlyInAnyOrder("r1=1", "r3=3", "r4=4", "r5=5");
    all.forEach(e -> positions.add(e.position()));
    assertResumesExactlyAfterEach(s, positions, all);
  }

  /** The state each key ends in when the changes are applied in order (deleted keys are absent). */
  private Map<String, Long> folded(Source<D> s, List<ChangeEvent<D>> events) {
    Map<String, Long> state = new TreeMap<>();
    for (ChangeEvent<D> e : events) {
      Long v = e.operation() == Operation.DELETE ? null : s.version(e);
      if (v == null) {
        state.remove(s.writtenKey(e));
      } else {
        state.put(s.writtenKey(e), v);
      }
    }
    return state;
  }

  /** Versions only grow per key (the contract's writes give every state a higher version). */
  private void assertNoKeyGoesBack(Source<D> s, List<ChangeEvent<D>> events) {
    Map<String, Long> highest = new HashMap<>();
    for (ChangeEvent<D> e : events) {
      Long v = e.operation() == Operation.DELETE ? null : s.version(e);
      if (v != null) {
        Long before = highest.put(s.writtenKey(e), v);
        assertThat(before == null || before < v)
            .as("%s: version %s after version %s (older or repeated) in %s", s.writtenKey(e), v, before,
                described(s, events))
            .isTrue();
      }
    }
  }

  @Test
  public void aCheckpointWhoseHistoryIsGoneIsLostHistoryNotASilentGap() {
    Source<D> s = closeAfter(newSourceWithForgettableHistory());
    List<ChangeEvent<D>> events;
    try (FeedCursor<D> c = s.feed().open(PartitionSpec.single(), StartPoint.latest())) {
      for (int i = 1; i <= 4; i++) {
        s.write(List.of(Write.set("h" + i, i)));
      }
      events = read(c, 4);
    }
    s.forgetThrough(events.get(2));
    assertThatThrownBy(() -> s.feed().open(PartitionSpec.single(), StartPoint.after(events.get(0).position())))
        .isInstanceOf(HistoryLostException.class);
  }

  @Test
  public void partitionsSplitTheKeysWithoutOverlapOrGap() {
    Source<D> s = source();
    FeedCursor<D> a = open(s, new PartitionSpec(0, 2), StartPoint.latest());
    FeedCursor<D> b = open(s, new PartitionSpec(1, 2), StartPoint.latest());
    List<Write> writes = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      writes.add(Write.set("p" + i, i));
    }
    s.write(writes);
    Set<String> seenA = new HashSet<>();
    Set<String> seenB = new HashSet<>();
    long deadline = System.nanoTime() + PATIENCE.toNanos();
    while (seenA.size() + seenB.size() < 40 && System.nanoTime() < deadline) {
      a.poll(POLL).forEach(e -> assertThat(seenA.add(e.key())).as("once: %s", e.key()).isTrue());
      b.poll(POLL).forEach(e -> assertThat(seenB.add(e.key())).as("once: %s", e.key()).isTrue());
    }
    assertThat(seenA).isNotEmpty().doesNotContainAnyElementsOf(seenB);
    assertThat(seenB).isNotEmpty();
    assertThat(seenA.size() + seenB.size()).isEqualTo(40);
    for (String key : seenA) {
      assertThat(new PartitionSpec(0, 2).owns(key)).as("partition 0 owns %s", key).isTrue();
    }
  }
}
