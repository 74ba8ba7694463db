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

  private static Applied at(long seq, long epoch, String node, long t) {
    return new Applied(seq, epoch, node, t);
  }

  @Test
  void anOlderEpochHandlingAfterANewerOneBeganIsAnOwnerOverlapUnlessItsOwnerWasStoppedAcrossTheTakeover() {
    // Partition 0: epoch 5 (n1) handles at 100..300, epoch 6 (n2) from 250: n1 was still handling.
    Map<Integer, List<Applied>> overlapping = Map.of(0, List.of(at(1, 5, "n1", 100), at(2, 5, "n1", 300),
        at(1, 6, "n2", 250), at(3, 6, "n2", 400)));
    var o = ChaosReport.overlaps(overlapping, Map.of());
    assertThat(o.count()).isEqualTo(1);
    assertThat(o.longest()).isEqualTo(Duration.ofMillis(50));
    assertThat(o.examples()).singleElement().asString().contains("epoch 5 (n1)").contains("epoch 6 (n2)");

    // The same, n1 SIGSTOPped from 120 to 280: the late write is a stopped process's, what fencing is for.
    var paused = ChaosReport.overlaps(overlapping, Map.of("n1", List.of(new long[] {120, 280})));
    assertThat(paused.count()).isZero();
    assertThat(paused.explainedByPause()).isEqualTo(1);

    // A pause earlier in the run, before epoch 5 began, explains nothing.
    var earlier = ChaosReport.overlaps(overlapping, Map.of("n1", List.of(new long[] {10, 50})));
    assertThat(earlier.count()).isEqualTo(1);

    // Handing over in turn, on any partition, is no overlap, whatever the keys.
    var inTurn = ChaosReport.overlaps(Map.of(0, List.of(at(1, 5, "n1", 100), at(2, 5, "n1", 200),
        at(2, 6, "n2", 201)), 1, List.of(at(1, 7, "n3", 150), at(2, 9, "n1", 150))), Map.of());
    assertThat(inTurn.count()).isZero();
    assertThat(inTurn.explainedByPause()).isZero();
  }

  @Test
  void aChangeBegunAfterTheLocalDeadlineIsLateUnlessTheMemberWasStoppedInBetweenAndBlindSpotsAreCounted() {
    List<String> output = List.of(
        "DEADLINES n1 begun=10 unknown=0 late=0 leastLeftMicros=-",
        "LATE n1 g/s#0of4 epoch=5 key=k at=1000 deadline=990 pastMicros=10000",
        "LATE n2 g/s#1of4 epoch=6 key=j at=5000 deadline=2000 pastMicros=3000000",
        "DEADLINES n1 begun=20 unknown=0 late=1 leastLeftMicros=1500",
        "DEADLINES n2 begun=7 unknown=2 late=1 leastLeftMicros=800");
    var d = ChaosReport.deadlines(output, Map.of("n2", List.of(new long[] {1900, 4990})));
    assertThat(d.late()).as("n1 was never stopped").isEqualTo(1);
    assertThat(d.longestLate()).isEqualTo(Duration.ofMillis(10));
    assertThat(d.examples()).singleElement().asString().startsWith("LATE n1");
    assertThat(d.explainedByPause()).as("n2 was stopped across its deadline").isEqualTo(1);
    assertThat(d.begun()).as("the last summary of each member").isEqualTo(27);
    assertThat(d.unknown()).isEqualTo(2);
    assertThat(d.leastLeft()).isEqualTo(Duration.ofNanos(800_000));
  }

  private static dev.sluice.lease.LeaseRecord record(String owner, long epoch, Long expiresAtMillis, long storeMillis) {
    return new dev.sluice.lease.LeaseRecord("g/s#0of4", owner, epoch,
        expiresAtMillis == null ? null : java.time.Instant.ofEpochMilli(expiresAtMillis), null,
        java.time.Instant.ofEpochMilli(storeMillis));
  }

  @Test
  void theOwnerlessTimeRunsFromATenuresExpiryOrLastSightingToTheNextAcquisition() {
    Ownership o = new Ownership(4, Duration.ofMillis(2_000));
    o.counting(true);
    o.sample(0, record("a", 1, 3_000L, 1_000));
    o.sample(0, record("a", 1, 3_500L, 1_500)); // renewed
    o.sample(0, record("a", 1, 3_500L, 3_600)); // expired at 3,500
    o.sample(0, record("b", 2, 6_200L, 4_300)); // acquired at 4,200 (its expiry less the lease)
    assertThat(o.longestGap()).isEqualTo(new ChaosReport.Gap(0, 3_500, Duration.ofMillis(700)));

    // Released (no expiry kept): from the last sample that saw it held; a takeover between two
    // samples after an expiry: from that expiry.
    o.sample(1, record("c", 3, 9_000L, 7_000));
    o.sample(1, record(null, 3, null, 7_100));
    o.sample(1, record("d", 4, 9_950L, 8_000)); // acquired at 7,950: 950 ms after 7,000
    o.sample(2, record("e", 5, 10_000L, 8_000));
    o.sample(2, record("f", 6, 12_100L, 10_200)); // acquired at 10,100, 100 ms after e's expiry
    assertThat(o.longestGap()).isEqualTo(new ChaosReport.Gap(1, 7_000, Duration.ofMillis(950)));

    o.counting(false);
    o.sample(3, record("g", 7, 10_000L, 8_000));
    o.sample(3, record("h", 8, 20_000L, 18_000)); // 8 s, but the writer had stopped
    assertThat(o.longestGap().length()).isEqualTo(Duration.ofMillis(950));
  }
}
