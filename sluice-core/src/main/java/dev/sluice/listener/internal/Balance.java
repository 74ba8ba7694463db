package dev.sluice.listener.internal;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The assignment rule, as a pure function every member evaluates on the same input (the live
 * membership as read from the lease store): with N partitions and M members, every member's
 * quota is floor(N/M), and the first N mod M members in name order get one more. The quotas sum to
 * N, so no member is idle while another holds more than ceil(N/M). See
 * docs/adr/0008-balanced-assignment.md. Public for the lease-traffic simulation of the benchmarks.
 */
public final class Balance {
  private Balance() {}

  /** The quota of every member: floor(N/M), plus one for the first N mod M names in order. */
  public static Map<String, Integer> quotas(Iterable<String> members, int partitions) {
    if (partitions < 1) {
      throw new IllegalArgumentException("partitions must be positive: " + partitions);
    }
    TreeSet<String> sorted = new TreeSet<>();
    members.forEach(sorted::add);
    Map<String, Integer> out = new TreeMap<>();
    if (sorted.isEmpty()) {
      return out;
    }
    int m = sorted.size();
    int floor = partitions / m;
    int extra = partitions % m;
    int rank = 0;
    for (String member : sorted) {
      out.put(member, floor + (rank++ < extra ? 1 : 0));
    }
    return out;
  }

  /** The quota of {@code me}, counted as a member whether or not {@code members} names it. */
  static int quota(List<String> members, String me, int partitions) {
    TreeSet<String> all = new TreeSet<>(members);
    all.add(me);
    return quotas(all, partitions).get(me);
  }
}
