package dev.sluice.app.demo.views;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Both demos of issue 5 end to end, small: each must end with 0 differences. */
class ViewsAndEnrolmentDemoTest {

  @Test
  void viewsDemoConvergesAfterAPausedOwnerWasTakenOver() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);

    ViewsDemo.Result r = new ViewsDemo(new ViewsDemo.Settings(600, 200, Duration.ofMillis(1500), 10), out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.differences()).as(printed).isZero();
    assertThat(r.writes()).isEqualTo(600);
    assertThat(r.viewDocuments()).isPositive();
    assertThat(r.pausedNodeLostItsLease()).isTrue();
    assertThat(printed).contains("SIGSTOP").contains("took over").contains("RESULT: OK");
  }

  @Test
  void enrolmentDemoEqualsSequentialApplication() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);

    EnrolmentDemo.Result r = new EnrolmentDemo(new EnrolmentDemo.Settings(500, 20, 20), out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.differences()).as(printed).isZero();
    assertThat(r.published()).isEqualTo(600);
    assertThat(r.applied() + r.superseded()).isEqualTo(600);
    assertThat(r.superseded()).as("duplicates and late messages recognised").isGreaterThanOrEqualTo(100);
    assertThat(printed).contains("RESULT: OK");
  }
}
