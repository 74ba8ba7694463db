package dev.sluice.kafka.connect.internal;

import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.storage.OffsetStorageReader;

/**
 * The connector's Connect offsets. Source partition: {@code {stream, partition, partitions}}, so
 * a different partition count is a different set of source partitions. Source offset: {@code
 * {position, time, epoch}} and, while keys are parked, {@code parked}: the feed's position token
 * (what {@code StartPoint.after} resumes from), its cluster time in epoch milliseconds, and the
 * partition's tenure count (one more each time a task opens it from a committed offset).
 */
public final class Offsets {
  public static final String STREAM = "stream";
  public static final String PARTITION = "partition";
  public static final String PARTITIONS = "partitions";
  public static final String POSITION = "position";
  public static final String TIME = "time";
  public static final String EPOCH = "epoch";
  public static final String PARKED = "parked";

  /** How many partition indexes of each other count are probed to find an older layout. */
  private static final int PROBED_INDEXES = 8;

  private Offsets() {}

  /**
   * The source partition map of partition {@code index} of {@code count} of {@code stream}. A
   * {@link HashMap} on purpose: Connect finds an offset by the serialized form of this map, field
   * order included, and the maps it reads back from its offsets topic (the REST offsets API, the
   * partitions it lists) are HashMaps; a map in another order would miss their offsets.
   */
  public static Map<String, Object> partition(String stream, int index, int count) {
    Map<String, Object> m = new HashMap<>();
    m.put(STREAM, stream);
    m.put(PARTITION, index);
    m.put(PARTITIONS, count);
    return m;
  }

  /** The source offset of {@code position}. */
  public static Map<String, Object> offset(Position position, long epoch, String parked) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put(POSITION, position.token());
    if (position.time() != null) {
      m.put(TIME, position.time().toEpochMilli());
    }
    m.put(EPOCH, epoch);
    if (parked != null) {
      m.put(PARKED, parked);
    }
    return m;
  }

  /** The position a committed offset holds, or null when there is none. */
  public static Position position(Map<String, Object> offset) {
    if (offset == null || !(offset.get(POSITION) instanceof String token) || token.isBlank()) {
      return null;
    }
    Object time = offset.get(TIME);
    return new Position(token, time instanceof Number n ? Instant.ofEpochMilli(n.longValue()) : null);
  }

  /** The epoch a committed offset holds, 0 when none. */
  public static long epoch(Map<String, Object> offset) {
    return offset != null && offset.get(EPOCH) instanceof Number n ? n.longValue() : 0;
  }

  /** A message saying what is wrong with an offset given to the offsets REST API, or null. */
  public static String invalid(Map<String, ?> partition, Map<String, ?> offset) {
    if (partition == null || !(partition.get(STREAM) instanceof String)
        || !(partition.get(PARTITION) instanceof Number) || !(partition.get(PARTITIONS) instanceof Number)) {
      return "a source partition must be {\"stream\": string, \"partition\": int, \"partitions\": int}, but was "
          + partition;
    }
    if (offset != null && !(offset.get(POSITION) instanceof String)) {
      return "a source offset must have a \"position\" string (a MongoDB resume token as extended JSON or"
          + " {\"$timestamp\": ...}, a PostgreSQL position as the feed writes it), but was " + offset;
    }
    return null;
  }

  /**
   * Committed offsets of {@code stream} for a partition count other than {@code count}, or an
   * empty map. Every index of the first such count found is read, so the caller can tell the
   * oldest of them.
   */
  public static Map<Map<String, Object>, Map<String, Object>> otherLayout(
      OffsetStorageReader reader, String stream, int count, int maxCount) {
    List<Map<String, Object>> probes = new ArrayList<>();
    for (int other = 1; other <= maxCount; other++) {
      if (other == count) {
        continue;
      }
      for (int i = 0; i < Math.min(other, PROBED_INDEXES); i++) {
        probes.add(partition(stream, i, other));
      }
    }
    Map<Map<String, Object>, Map<String, Object>> found = reader.offsets(probes);
    for (Map.Entry<Map<String, Object>, Map<String, Object>> e : found.entrySet()) {
      if (position(e.getValue()) != null) {
        int other = ((Number) e.getKey().get(PARTITIONS)).intValue();
        List<Map<String, Object>> all = new ArrayList<>();
        for (int i = 0; i < other; i++) {
          all.add(partition(stream, i, other));
        }
        Map<Map<String, Object>, Map<String, Object>> layout = new HashMap<>();
        reader.offsets(all).forEach((p, o) -> {
          if (position(o) != null) {
            layout.put(p, o);
          }
        });
        return layout;
      }
    }
    return Map.of();
  }
}
