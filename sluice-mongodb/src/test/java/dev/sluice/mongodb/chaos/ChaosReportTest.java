package dev.sluice.mongodb.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.mongodb.chaos.ChaosReport.Applied;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The chaos checks' definitions on hand-made applied logs: what passes and what each one catches. */
class ChaosReportTest {

  private static List<Applied> log(long epoch, long... seqs) {
    List<Applied> l = new ArrayList<>();
    for (long s : seqs) {
      l.add(new Applied(s, epoch, "n" + epoch, 0));
    }
    return l;
  }

  @SafeVarargs
  private static List<Applied> concat(List<Applied>... parts) {
    List<Applied> all = new ArrayList<>();
    for (List<Applied> p : parts) {
      all.addAll(p);
    }
    return all;
  }

  @Test
  void aReplayFromTheCheckpointAfterATakeoverIsDuplicatesNotAViolation() {
    // epoch 5 applied 1..6 and committed after 4; epoch 7 replays 5, 6 and goes on.
    var a = ChaosReport.analyse(Map.of("k", concat(log(5, 1, 2, 3, 4, 5, 6), log(7, 5, 6, 7, 8))), Map.of("k", 8L));
    assertThat(a.orderViolations).isZero();
    assertThat(a.lostCount).isZero();
    assertThat(a.duplicates).isEqualTo(2);
    assertThat(a.deepestReplay).isEqualTo(2);
  }

  @Test
  void aStaleOwnersWriteAcceptedBeforeTheNewOwnerReachedTheKeyIsNoViolation() {
    // epoch 5 was paused after reading 4; epoch 6 took over at checkpoint 2 but had not written
    // this key yet, so the fence (per document) let epoch 5's late write of 4 through.
    var a = ChaosReport.analyse(Map.of("k", concat(log(5, 1, 2, 3, 4), log(6, 3, 4, 5))), Map.of("k", 5L));
    assertThat(a.orderViolations).isZero();
    assertThat(a.duplicates).isEqualTo(2);
  }

  @Test
  void aSeqAcceptedBeforeAnEarlierOneOfItsKeyIsAViolationEvenIfTheEarlierOneComesLater() {
    var a = ChaosReport.analyse(Map.of("k", log(3, 1, 2, 4, 3, 5)), Map.of("k", 5L));
    assertThat(a.orderViolations).isEqualTo(1);
    assertThat(a.violations).singleElement().asString().contains("seq 4").contains("before seq 3");
    assertThat(a.lostCount).isZero();
  }

  @Test
  void aLowerEpochAcceptedAfterAHigherOneIsAFencingViolation() {
    var a = ChaosReport.analyse(Map.of("k", concat(log(6, 1, 2), log(5, 3))), Map.of("k", 3L));
    assertThat(a.orderViolations).isEqualTo(1);
    assertThat(a.violations).singleElement().asString().contains("epoch 5").contains("after a write under epoch 6");
  }

  @Test
  void aWrittenSeqNeverAppliedIsLostAndAKeyNeverAppliedLosesAll() {
    var a = ChaosReport.analyse(Map.of("k", log(1, 1, 2, 3)), Map.of("k", 4L, "j", 2L));
    assertThat(a.lostCount).isEqualTo(3);
    assertThat(a.lost).containsExactlyInAnyOrder("k:4", "j:1", "j:2");
  }

  @Test
  void theLongestStallIsTheLongestGapOfOnePartitionThatBeganWhileTheWriterWrote() {
    var stall = ChaosReport.longestStall(
        Map.of(0, List.of(100L, 200L, 2_200L, 2_300L), 1, List.of(150L, 1_000L, 9_000L)), 0, 5_000);
    assertThat(stall.partition()).isEqualTo(1);
    assertThat(stall.fromMillis()).isEqualTo(1_000);
    assertThat(stall.length()).isEqualTo(Duration.ofMillis(8_000));
    var afterTheWriter = ChaosReport.longestStall(Map.of(0, List.of(100L, 6_000L, 20_000L)), 0, 5_000);
    assertThat(afterTheWriter.length()).as("the gap from 6 s began after the writer stopped at 5 s")
        .isEqualTo(Duration.ofMillis(5_900));
  }
}
