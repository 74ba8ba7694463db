package dev.sluice.listener.internal;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import java.time.Clock;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The keys of one partition that have parked changes, as delivery needs them: a change of such a
 * key is parked behind the earlier ones instead of overtaking them. The dead-letter store is the
 * truth (docs/adr/0045-parked-keys-follow-the-dead-letter-store.md); this keeps a bounded cache of
 * it:
 *
 * <ul>
 *   <li>at most {@code maxCachedKeys} keys are held; when the partition has more, a key not in the
 *       cache is asked of the store ({@link DeadLetterStore#hasParked}), one query per change of
 *       such a key;
 *   <li>a change of a cached key asks the store whether the key still has parked changes, so once
 *       an operator replayed or discarded all of them the very next change of the key flows (one
 *       query per change of a parked key; changes of other keys cost nothing).
 * </ul>
 *
 * <p>Keys cannot become parked behind this tenure's back: it parks them itself, and a park from an
 * older owner is refused by the store's epoch fence. Thread-safe: with a listener concurrency above
 * 1, several threads of one tenure deliver changes of different keys.
 */
public final class ParkedKeys<D> {
  private final DeadLetterStore<D> store;
  private final String stream;
  private final int partition;
  private final Clock clock;
  private final int maxCachedKeys;
  private final Set<String> keys = new LinkedHashSet<>();
  /** Whether {@link #keys} holds every parked key of the partition. */
  private boolean complete = true;

  public ParkedKeys(DeadLetterStore<D> store, String stream, int partition, Clock clock,
      int maxCachedKeys) {
    if (store != null && maxCachedKeys < 1) {
      throw new IllegalArgumentException("maxCachedKeys must be >= 1, but was " + maxCachedKeys);
    }
    this.store = store;
    this.stream = stream;
    this.partition = partition;
    this.clock = clock;
    this.maxCachedKeys = maxCachedKeys;
  }

  public static <D> ParkedKeys<D> none() {
    return new ParkedKeys<>(null, null, 0, null, 0);
  }

  /** Reads the parked keys of the partition from the store, at most the cache's bound. */
  public synchronized void load() {
    if (store == null) {
      return;
    }
    Set<String> read = store.parkedKeys(stream, partition, maxCachedKeys + 1);
    keys.clear();
    complete = true;
    for (String k : read) {
      if (keys.size() == maxCachedKeys) {
        complete = false;
        break;
      }
      keys.add(k);
    }
  }

  /** Whether a change of {@code key} must be parked behind an earlier parked change. */
  public synchronized boolean blocks(String key) {
    if (keys.contains(key)) {
      if (store.hasParked(stream, partition, key)) {
        return true;
      }
      keys.remove(key); // replayed or discarded meanwhile: the key flows again
      return false;
    }
    return !complete && store.hasParked(stream, partition, key);
  }

  /**
   * Parks {@code event} under the lease {@code epoch}.
   *
   * @throws dev.sluice.deadletter.StaleParkException if a later epoch parked in this partition
   */
  public synchronized void park(ChangeEvent<D> event, long epoch, String reason, int attempts) {
    if (store == null) {
      throw new IllegalStateException("no dead-letter store configured");
    }
    store.park(new ParkedChange<>(event, partition, reason, attempts, clock.instant(), epoch,
        stream));
    if (keys.size() < maxCachedKeys) {
      keys.add(event.key());
    } else if (!keys.contains(event.key())) {
      complete = false;
    }
  }

  /** How many keys the cache holds now; for tests and status. */
  public synchronized int cachedKeys() {
    return keys.size();
  }
}
