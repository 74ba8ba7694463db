package dev.sluice.mongodb.feed;

import java.time.Duration;

/**
 * How many documents the next read of a snapshot asks for ({@code docs/adr/0085}): the configured
 * chunk size, halved after a read whose round trip ran out of time (large documents, a slow
 * server), and doubled again, never past the configured size, after a read that took less than a
 * quarter of the round-trip bound in all. One per feed: its partitions read the same collection,
 * so what one of them learns about its documents serves the others. Thread-safe.
 */
final class ChunkSizing {
  private final int configured;
  /** The bound of each round trip of a read; null when the source has none. */
  private final Duration roundTripBound;
  private int current;

  ChunkSizing(int configured, Duration roundTripBound) {
    if (configured < 1) {
      throw new IllegalArgumentException("chunk size " + configured);
    }
    this.configured = configured;
    this.roundTripBound = roundTripBound;
    this.current = configured;
  }

  /** The limit of the next read. */
  synchronized int current() {
    return current;
  }

  int configured() {
    return configured;
  }

  /**
   * A read of {@code limit} documents timed out: the next asks for half as many (at least one).
   *
   * @return the limit of the next read
   */
  synchronized int timedOut(int limit) {
    current = Math.max(1, Math.min(current, limit / 2));
    return current;
  }

  /**
   * A read of {@code limit} documents took {@code took} in all: when that is under a quarter of
   * the round-trip bound, each of its round trips was too, and a read twice as large keeps well
   * within the bound.
   */
  synchronized void read(int limit, Duration took) {
    if (current < configured && limit >= current && roundTripBound != null
        && took.compareTo(roundTripBound.dividedBy(4)) < 0) {
      current = (int) Math.min(configured, 2L * current);
    }
  }

  Duration roundTripBound() {
    return roundTripBound;
  }
}
