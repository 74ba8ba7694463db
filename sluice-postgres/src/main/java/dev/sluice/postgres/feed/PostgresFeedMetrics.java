package dev.sluice.postgres.feed;

import dev.sluice.feed.PartitionSpec;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Optional;
import java.util.function.ToDoubleFunction;

/**
 * Micrometer gauges of a PostgreSQL feed's slots, tagged {@code slot}: {@code
 * sluice.pg.slot.retained.bytes} (WAL the slot keeps on the server) and {@code
 * sluice.pg.slot.safe.bytes} (WAL that may still be written before the server invalidates the
 * slot, NaN when {@code max_slot_wal_keep_size} is unlimited). Alert when the safe bytes approach
 * zero: an invalidated slot is lost history. Each read asks the server (one query per gauge).
 * Micrometer is an optional dependency of this module: add it to use this class.
 */
public final class PostgresFeedMetrics {
  private PostgresFeedMetrics() {}

  /** Registers the gauges of the slots of {@code partitions} partitions of {@code feed}. */
  public static void bind(MeterRegistry registry, PostgresChangeFeed feed, int partitions) {
    for (int i = 0; i < partitions; i++) {
      PartitionSpec partition = new PartitionSpec(i, partitions);
      String slot = feed.slotName(partition);
      gauge(registry, "sluice.pg.slot.retained.bytes", feed, partition, slot, s -> s.retainedBytes(),
          "WAL the slot keeps on the server");
      gauge(registry, "sluice.pg.slot.safe.bytes", feed, partition, slot,
          s -> s.safeBytes() == null ? Double.NaN : s.safeBytes(),
          "WAL that may still be written before the server invalidates the slot");
    }
  }

  private static void gauge(MeterRegistry registry, String name, PostgresChangeFeed feed, PartitionSpec partition,
      String slot, ToDoubleFunction<PostgresChangeFeed.SlotStats> value, String description) {
    Gauge.builder(name, feed, f -> {
          try {
            Optional<PostgresChangeFeed.SlotStats> stats = f.slot(partition);
            return stats.map(value::applyAsDouble).orElse(Double.NaN);
          } catch (RuntimeException e) {
            return Double.NaN;
          }
        })
        .tags("slot", slot)
        .description(description)
        .register(registry);
  }
}
