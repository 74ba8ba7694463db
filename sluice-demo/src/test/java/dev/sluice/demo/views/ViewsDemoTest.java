package dev.sluice.demo.views;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The views scenario end to end: listeners in two real child JVMs, concurrent writers, the active
 * JVM frozen with SIGSTOP past its lease and resumed; the views end equal to the join recomputed
 * from scratch.
 */
class ViewsDemoTest {
  @Test
  void viewsEqualTheRecomputedJoinAfterAPausedListenerJvmAndConcurrentWrites() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);

    ViewsDemo.Result r =
        new ViewsDemo(new ViewsDemo.Settings(450, 150, 3, 8, Duration.ofMillis(1500), 10), out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.orderViewDifferences()).as(printed).isZero();
    assertThat(r.customerStatsDifferences()).as(printed).isZero();
    assertThat(r.writes()).isEqualTo(450);
    assertThat(r.writesByKind().values().stream().mapToInt(Integer::intValue).sum()).isEqualTo(450);
    assertThat(r.writesByKind()).allSatisfy((kind, n) -> assertThat(n).as(kind).isPositive());
    assertThat(r.takeoverEpoch()).isGreaterThan(r.pausedEpoch());
    assertThat(r.pausedNodeLostItsLeases()).isTrue();
    assertThat(r.orders()).isPositive();
    assertThat(r.customers()).isEqualTo(8 + 1); // plus the sentinel
    assertThat(printed).contains("SIGSTOP node-").contains("over after").contains("RESULT: OK");
  }
}
