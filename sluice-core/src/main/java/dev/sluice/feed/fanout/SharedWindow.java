package dev.sluice.feed.fanout;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.PartitionSpec;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The most recent changes a {@link SharedReader}'s shared cursor read, of every partition, oldest
 * first: a partition that joins a little behind the shared cursor is served from it. It vouches
 * only for an unbroken run: every change after its floor key up to the shared cursor's key is in
 * it, and a change or a position whose place is unknown breaks the run. Used under the reader's
 * lock.
 *
 * @param <D> the feed's document type
 */
final class SharedWindow<D> {
  private final int size;
  private final ArrayDeque<Keyed<D>> changes = new ArrayDeque<>();
  /** Every change after this key up to the shared cursor's key is in {@link #changes}; null: none is vouched for. */
  private String floorKey;

  /** A window of the last {@code size} changes (0: none kept). */
  SharedWindow(int size) {
    this.size = size;
  }

  /** The shared cursor (re)starts at {@code key}: nothing after it was read yet. */
  void startAt(String key) {
    changes.clear();
    floorKey = key;
  }

  /** The shared cursor closed: the window vouches for nothing. */
  void clear() {
    changes.clear();
    floorKey = null;
  }

  /** Whether every change after {@code key} up to the shared cursor's is in the window. */
  boolean serves(String key) {
    return floorKey != null && key.compareTo(floorKey) >= 0;
  }

  /** The changes after {@code key} that {@code partition} receives, oldest first. */
  List<ChangeEvent<D>> after(String key, PartitionSpec partition) {
    List<ChangeEvent<D>> out = new ArrayList<>();
    for (Keyed<D> k : changes) {
      if (k.key.compareTo(key) > 0 && partition.receives(k.event.key())) {
        out.add(k.event);
      }
    }
    return out;
  }

  /** Keeps a change the shared cursor read, at {@code key} (null: its place is unknown). */
  void add(ChangeEvent<D> e, String key) {
    if (size > 0 && key != null) {
      changes.addLast(new Keyed<>(e, key));
      if (changes.size() > size) {
        floorKey = changes.removeFirst().key;
      }
    } else {
      floorKey = null; // a change whose place is unknown: the window cannot vouch for it
    }
  }

  /** The shared cursor stands at a position whose place is unknown: the window cannot vouch for what follows. */
  void broken() {
    floorKey = null;
  }

  private record Keyed<D>(ChangeEvent<D> event, String key) {}
}
