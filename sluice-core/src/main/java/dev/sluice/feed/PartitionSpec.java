package dev.sluice.feed;

import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * Which share of a stream a cursor reads: partition {@code index} of {@code count}. A change
 * belongs to the partition chosen by a stable hash of its key, so every change of one key is
 * always in the same partition and per-key order holds across the cluster.
 */
public record PartitionSpec(int index, int count) {
  public PartitionSpec {
    if (count < 1) {
      throw new IllegalArgumentException("partition count must be >= 1, but was " + count);
    }
    if (index < 0 || index >= count) {
      throw new IllegalArgumentException(
          "partition index must be in [0, " + count + "), but was " + index);
    }
  }

  public static PartitionSpec single() {
    return new PartitionSpec(0, 1);
  }

  /** Whether a change with this key belongs to this partition. Stable across JVMs and versions. */
  public boolean owns(String key) {
    return count == 1 || indexOf(key, count) == index;
  }

  /**
   * Whether a change with this key is delivered to this partition: the changes of its own keys, and
   * the keyless ones (about the whole collection or table, such as a drop), which every partition
   * receives.
   */
  public boolean receives(String key) {
    return key.isEmpty() || owns(key);
  }

  /** The index of the partition, of {@code count}, that owns changes with this key. */
  public static int indexOf(String key, int count) {
    if (count == 1) {
      return 0;
    }
    CRC32C crc = new CRC32C();
    crc.update(key.getBytes(StandardCharsets.UTF_8));
    return (int) (crc.getValue() % count);
  }
}
