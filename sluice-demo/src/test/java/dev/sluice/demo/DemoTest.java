package dev.sluice.demo;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The demo end to end: three real listener JVMs, the owner frozen with SIGSTOP inside its handler
 * (seed 000, figure 3), a takeover, and the frozen process's late write rejected by the fence.
 */
class DemoTest {
  @Test
  void thePausedOwnerIsFencedOffAndNothingIsLost() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);

    Demo.Result r = new Demo(new Demo.Settings(900, 400, Duration.ofSeconds(2), 25, 20), out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.lost()).as(printed).isZero();
    assertThat(r.delivered()).isEqualTo(900);
    assertThat(r.written()).isEqualTo(900);
    assertThat(r.staleRejected()).as("the paused owner's late write was rejected").isEqualTo(1);
    assertThat(r.pausedNodeStopped()).isTrue();
    assertThat(r.epochs()).hasSizeGreaterThanOrEqualTo(2);
    // Redelivery after the takeover is bounded by the checkpoint batch plus the change in flight.
    assertThat(r.duplicates()).isLessThanOrEqualTo(25 + 1);
    assertThat(printed).contains("SIGSTOP").contains("took over").contains("RESULT: OK")
        .containsPattern("\\[\\s*\\d+s\\] owner=node-\\d");
  }
}
