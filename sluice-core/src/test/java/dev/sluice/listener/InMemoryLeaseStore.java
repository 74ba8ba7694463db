package dev.sluice.listener;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Reference {@link LeaseStore} in memory, for the engine's unit tests only. The real stores are
 * tested against real servers with the testkit's conformance suite.
 */
final class InMemoryLeaseStore implements LeaseStore {
  private record Row(String owner, long epoch, Instant expiresAt, Position checkpoint) {}

  private final Map<String, Row> rows = new TreeMap<>();
  /** The highest epoch ever granted per name; survives deletion so epochs never repeat. */
  private final Map<String, Long> highestEpoch = new TreeMap<>();
  private final Clock clock;
  private int commits;
  /** Release notices (LeaseStore#watchReleases), off unless a test turns them on. */
  private volatile boolean releaseNotices;
  private final java.util.List<java.util.Map.Entry<String, java.util.function.Consumer<String>>> watchers =
      new java.util.concurrent.CopyOnWriteArrayList<>();

  /** Turns on release notices: watchers hear of every release and deletion under their prefix. */
  InMemoryLeaseStore withReleaseNotices() {
    releaseNotices = true;
    return this;
  }

  @Override
  public AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
    if (!releaseNotices) {
      return () -> { };
    }
    var entry = java.util.Map.entry(prefix, released);
    watchers.add(entry);
    return () -> watchers.remove(entry);
  }

  private void notifyReleased(String name) {
    watchers.stream().filter(w -> name.startsWith(w.getKey())).forEach(w -> w.getValue().accept(name));
  }

  InMemoryLeaseStore(Clock clock) {
    this.clock = clock;
  }

  @Override
  public synchronized Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    Row row = rows.get(name);
    Instant now = clock.instant();
    if (row != null && row.owner() != null && row.expiresAt().isAfter(now) && !row.owner().equals(owner)) {
      return Optional.empty();
    }
    long epoch = highestEpoch.merge(name, 1L, (last, one) -> last + one);
    Row next = new Row(owner, epoch, now.plus(duration), row == null ? null : row.checkpoint());
    rows.put(name, next);
    return Optional.of(new Lease(name, owner, epoch, next.expiresAt(), next.checkpoint()));
  }

  private Row current(Lease lease) {
    Row row = rows.get(lease.name());
    if (row == null || !lease.owner().equals(row.owner()) || row.epoch() != lease.epoch()) {
      throw new LeaseLostException(lease.name(), lease.epoch(), "held by " + (row == null ? "nobody" : row.owner() + "/" + row.epoch()));
    }
    return row;
  }

  @Override
  public synchronized Lease renew(Lease lease, Duration duration) {
    Row row = current(lease);
    Row next = new Row(row.owner(), row.epoch(), clock.instant().plus(duration), row.checkpoint());
    rows.put(lease.name(), next);
    return lease.withExpiresAt(next.expiresAt());
  }

  @Override
  public synchronized Lease commit(Lease lease, Position checkpoint) {
    Row row = current(lease);
    rows.put(lease.name(), new Row(row.owner(), row.epoch(), row.expiresAt(), checkpoint));
    commits++;
    return lease.withCheckpoint(checkpoint);
  }

  @Override
  public synchronized boolean release(Lease lease) {
    Row row = rows.get(lease.name());
    if (row == null || !lease.owner().equals(row.owner()) || row.epoch() != lease.epoch()) {
      return false;
    }
    rows.put(lease.name(), new Row(null, row.epoch(), clock.instant(), row.checkpoint()));
    notifyReleased(lease.name());
    return true;
  }

  @Override
  public synchronized boolean delete(Lease lease) {
    Row row = rows.get(lease.name());
    if (row == null || !lease.owner().equals(row.owner()) || row.epoch() != lease.epoch()) {
      return false;
    }
    rows.remove(lease.name());
    notifyReleased(lease.name());
    return true;
  }

  @Override
  public synchronized boolean deleteIfIdle(String name, long epoch) {
    Row row = rows.get(name);
    if (row == null || row.epoch() != epoch
        || row.owner() != null && row.expiresAt().isAfter(clock.instant())) {
      return false;
    }
    rows.remove(name);
    notifyReleased(name);
    return true;
  }

  /** Simulates another process taking the lease over (as after this process paused). */
  synchronized long steal(String name, String thief) {
    Row row = rows.get(name);
    long epoch = highestEpoch.merge(name, 1L, (last, one) -> last + one);
    rows.put(name, new Row(thief, epoch, clock.instant().plusSeconds(600), row.checkpoint()));
    return epoch;
  }

  synchronized int commits() {
    return commits;
  }

  @Override
  public synchronized Optional<LeaseRecord> read(String name) {
    Row r = rows.get(name);
    return r == null ? Optional.empty()
        : Optional.of(new LeaseRecord(name, r.owner(), r.epoch(), r.expiresAt(), r.checkpoint(), clock.instant()));
  }

  @Override
  public synchronized List<LeaseRecord> list(String prefix) {
    return rows.keySet().stream().filter(n -> n.startsWith(prefix)).map(n -> read(n).orElseThrow()).toList();
  }

  @Override
  public Instant now() {
    return clock.instant();
  }
}
