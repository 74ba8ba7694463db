package dev.sluice.testkit.sink;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * What a consumer received compared with what the source produced: lost messages, duplicates
 * (which an inbox removes) and per-key order violations. For tests and the demo's verification
 * table.
 *
 * @param expected messages the source produced
 * @param received messages the consumer took, duplicates included
 * @param distinct distinct message ids received
 * @param lost expected ids never received
 * @param duplicates received minus distinct
 * @param outOfOrderKeys keys whose first deliveries are not in source order
 */
public record DeliveryReport(
    int expected, int received, int distinct, List<String> lost, int duplicates, List<String> outOfOrderKeys) {

  public DeliveryReport {
    lost = List.copyOf(lost);
    outOfOrderKeys = List.copyOf(outOfOrderKeys);
  }

  /** One consumed message: its key and message id. */
  public record Delivery(String key, String id) {
    public Delivery {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(id, "id");
    }
  }

  /**
   * Compares {@code consumed} (in arrival order) with {@code sourceOrder}: per key, the message
   * ids in the order the source produced them.
   */
  public static DeliveryReport of(Map<String, List<String>> sourceOrder, List<Delivery> consumed) {
    Set<String> seen = new HashSet<>();
    Map<String, List<String>> firstDeliveries = new LinkedHashMap<>();
    for (Delivery d : consumed) {
      if (seen.add(d.id())) {
        firstDeliveries.computeIfAbsent(d.key(), k -> new ArrayList<>()).add(d.id());
      }
    }
    int expected = 0;
    List<String> lost = new ArrayList<>();
    List<String> outOfOrder = new ArrayList<>();
    for (Map.Entry<String, List<String>> e : sourceOrder.entrySet()) {
      expected += e.getValue().size();
      for (String id : e.getValue()) {
        if (!seen.contains(id)) {
          lost.add(id);
        }
      }
      List<String> got = firstDeliveries.getOrDefault(e.getKey(), List.of());
      List<String> wanted = new ArrayList<>(e.getValue());
      wanted.retainAll(new HashSet<>(got));
      if (!got.stream().filter(new HashSet<>(e.getValue())::contains).toList().equals(wanted)) {
        outOfOrder.add(e.getKey());
      }
    }
    return new DeliveryReport(expected, consumed.size(), seen.size(), lost, consumed.size() - seen.size(), outOfOrder);
  }

  /** Nothing lost and every key in source order (duplicates allowed: at least once). */
  public boolean ok() {
    return lost.isEmpty() && outOfOrderKeys.isEmpty();
  }

  @Override
  public String toString() {
    Map<String, Object> rows = new LinkedHashMap<>();
    rows.put("expected", expected);
    rows.put("received", received);
    rows.put("distinct", distinct);
    rows.put("duplicates (removed by the inbox)", duplicates);
    rows.put("lost", lost.size() + (lost.isEmpty() ? "" : " " + lost.subList(0, Math.min(5, lost.size()))));
    rows.put("keys out of order", outOfOrderKeys.size() + (outOfOrderKeys.isEmpty() ? "" : " " + outOfOrderKeys));
    StringBuilder b = new StringBuilder();
    rows.forEach((k, v) -> b.append(String.format("%-36s %s%n", k, v)));
    return b.toString();
  }

}
