package dev.sluice.testkit.sink;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.sink.DeliveryReport.Delivery;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DeliveryReportTest {
  private static final Map<String, List<String>> SOURCE =
      Map.of("a", List.of("a1", "a2", "a3"), "b", List.of("b1", "b2"));

  @Test
  void aReplayedSuffixIsDuplicatesNotDisorder() {
    DeliveryReport r = DeliveryReport.of(SOURCE, List.of(
        new Delivery("a", "a1"), new Delivery("b", "b1"), new Delivery("a", "a2"),
        new Delivery("a", "a2"), new Delivery("a", "a3"), new Delivery("b", "b2"), new Delivery("b", "b1")));
    assertThat(r.ok()).isTrue();
    assertThat(r.duplicates()).isEqualTo(2);
    assertThat(r.distinct()).isEqualTo(5);
    assertThat(r.toString()).containsPattern("duplicates \\(removed by the inbox\\) +2\\n");
  }

  @Test
  void reportsLostAndReorderedKeys() {
    DeliveryReport r = DeliveryReport.of(SOURCE, List.of(
        new Delivery("a", "a2"), new Delivery("a", "a1"), new Delivery("b", "b2")));
    assertThat(r.ok()).isFalse();
    assertThat(r.lost()).containsExactlyInAnyOrder("a3", "b1");
    assertThat(r.outOfOrderKeys()).containsExactly("a");
  }
}
