package dev.sluice.kafka.connect.internal;

import java.util.ArrayList;
import java.util.List;

/**
 * One source partition of the connector: partition {@code index} of {@code count} of one
 * stream (a collection or a table, as configured). The connector spreads units over its tasks; a task reads its units.
 */
public record Unit(String stream, int index, int count) {

  /** Every unit of the given streams (collections or tables), stream by stream. */
  public static List<Unit> all(List<String> collections, int count) {
    List<Unit> units = new ArrayList<>();
    for (String c : collections) {
      for (int i = 0; i < count; i++) {
        units.add(new Unit(c, i, count));
      }
    }
    return units;
  }

  /**
   * Spreads {@code units} over {@code tasks} tasks round-robin, so the partitions of one
   * collection land on different tasks; returns one list per task, none empty.
   */
  public static List<List<Unit>> spread(List<Unit> units, int tasks) {
    int n = Math.min(tasks, units.size());
    List<List<Unit>> out = new ArrayList<>();
    for (int t = 0; t < n; t++) {
      out.add(new ArrayList<>());
    }
    for (int u = 0; u < units.size(); u++) {
      out.get(u % n).add(units.get(u));
    }
    return out;
  }

  /** The task configuration form: {@code index/count@collection,...} (collections hold no comma). */
  public static String encode(List<Unit> units) {
    StringBuilder b = new StringBuilder();
    for (Unit u : units) {
      if (b.length() > 0) {
        b.append(',');
      }
      b.append(u.index).append('/').append(u.count).append('@').append(u.stream);
    }
    return b.toString();
  }

  /** Reads {@link #encode}'s form. */
  public static List<Unit> decode(String encoded) {
    List<Unit> units = new ArrayList<>();
    for (String part : encoded.split(",")) {
      int slash = part.indexOf('/');
      int at = part.indexOf('@');
      units.add(new Unit(part.substring(at + 1), Integer.parseInt(part.substring(0, slash)),
          Integer.parseInt(part.substring(slash + 1, at))));
    }
    return units;
  }
}
