package dev.sluice.listener.internal;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import java.time.Clock;
import java.util.HashSet;
import java.util.Set;

/** The keys of one partition with parked changes, as the delivery code needs them. */
public final class ParkedKeys<D> {
  private final DeadLetterStore<D> store;
  private final String stream;
  private final int partition;
  private final Clock clock;
  private Set<String> keys = new HashSet<>();

  public ParkedKeys(DeadLetterStore<D> store, String stream, int partition, Clock clock, int maxCachedKeys) {
    this.store = store;
    this.stream = stream;
    this.partition = partition;
    this.clock = clock;
  }

  public static <D> ParkedKeys<D> none() {
    return new ParkedKeys<>(null, null, 0, null, 0);
  }

  public void load() {
    keys = store == null ? new HashSet<>() : new HashSet<>(store.parkedKeys(stream, partition));
  }

  public boolean blocks(String key) {
    return keys.contains(key);
  }

  public void park(ChangeEvent<D> event, long epoch, String reason, int attempts) {
    if (store == null) {
      throw new IllegalStateException("no dead-letter store configured");
    }
    store.park(new ParkedChange<>(event, partition, reason, attempts, clock.instant()));
    keys.add(event.key());
  }

  public void committed() {}

  public void lost(long epoch) {}
}
