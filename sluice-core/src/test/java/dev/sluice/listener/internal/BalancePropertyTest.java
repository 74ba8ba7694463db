package dev.sluice.listener.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

class BalancePropertyTest {

  private static List<String> members(int m) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < m; i++) {
      out.add("g/s@member:node-" + (char) ('a' + i) + "/1@host/x#" + i);
    }
    return out;
  }

  @Property
  void quotasSumToThePartitionsAndAreEachFloorOrCeil(@ForAll @IntRange(min = 1, max = 64) int n,
      @ForAll @IntRange(min = 1, max = 16) int m, @ForAll long shuffleSeed) {
    List<String> names = members(m);
    Collections.shuffle(names, new java.util.Random(shuffleSeed));
    Map<String, Integer> quotas = Balance.quotas(names, n);
    assertThat(quotas).hasSize(m);
    assertThat(quotas.values().stream().mapToInt(Integer::intValue).sum()).isEqualTo(n);
    assertThat(quotas.values()).allSatisfy(q -> assertThat(q).isBetween(n / m, (n + m - 1) / m));
  }

  @Property
  void everyMemberComputesTheSameQuotasWhateverOrderItReadsTheMembersIn(
      @ForAll @IntRange(min = 1, max = 64) int n, @ForAll @IntRange(min = 1, max = 16) int m,
      @ForAll long seed) {
    List<String> names = members(m);
    List<String> shuffled = new ArrayList<>(names);
    Collections.shuffle(shuffled, new java.util.Random(seed));
    assertThat(Balance.quotas(shuffled, n)).isEqualTo(Balance.quotas(names, n));
    for (String me : names) {
      assertThat(Balance.quota(shuffled, me, n)).isEqualTo(Balance.quotas(names, n).get(me));
    }
  }

  @Example
  void fourOnThreeIsTwoOneOneAndSixOnFourIsTwoTwoOneOne() {
    assertThat(Balance.quotas(List.of("c", "a", "b"), 4))
        .isEqualTo(Map.of("a", 2, "b", 1, "c", 1));
    assertThat(Balance.quotas(List.of("d", "c", "b", "a"), 6).values()).containsExactly(2, 2, 1, 1);
    assertThat(Balance.quotas(List.of("a", "b", "c", "d", "e"), 3).values())
        .containsExactly(1, 1, 1, 0, 0);
  }

  @Example
  void aMemberNotYetInTheListCountsItself() {
    assertThat(Balance.quota(List.of("a", "b"), "c", 4)).isEqualTo(1);
    assertThat(Balance.quota(List.of(), "c", 4)).isEqualTo(4);
  }

  @Example
  void zeroPartitionsIsRefused() {
    assertThatThrownBy(() -> Balance.quotas(List.of("a"), 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("partitions");
  }
}
