package dev.sluice.demo.enrolment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The enrolment scenario end to end on the embedded AMQP broker and MongoDB: shuffled, duplicated
 * sequenced messages, five concurrent consumers, lost acknowledgements; the stored classes equal
 * applying the messages in sequence order.
 */
class EnrolmentDemoTest {
  @Test
  void fiveConsumersTakingShuffledDuplicatedMessagesEndAsIfAppliedInSequenceOrder() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);
    EnrolmentDemo.Settings settings =
        new EnrolmentDemo.Settings(400, 10, 5, 25, 10, 5, 5, 0, Duration.ofSeconds(60), 11);

    EnrolmentDemo.Result r = new EnrolmentDemo(settings, out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.differences()).as(printed).isZero();
    assertThat(r.parked()).isZero();
    assertThat(r.queueLeft()).isZero();
    assertThat(r.johnInCs101()).as("add 1 / remove 2 / add 3 published as 1, 3, 2").isTrue();
    assertThat(r.distinct()).isEqualTo(400);
    assertThat(r.duplicatesPublished()).isEqualTo(100);
    // Every published message was applied at least once; requeued ones were applied again.
    assertThat(r.deliveries()).isEqualTo(500 + r.requeuedAfterWrite());
    assertThat(r.applied() + r.superseded()).isEqualTo(r.deliveries());
    assertThat(r.superseded()).as("duplicates and requeued copies are recognised")
        .isGreaterThanOrEqualTo(100 + r.requeuedAfterWrite());
    assertThat(r.perConsumer()).hasSize(5);
    assertThat(r.ok()).isTrue();
    assertThat(printed).contains("differences from sequence order").contains("RESULT: OK");
  }

  @Test
  void malformedMessagesAreParkedWithTheirCauseAndFailTheRun() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);
    EnrolmentDemo.Settings settings =
        new EnrolmentDemo.Settings(60, 5, 3, 10, 0, 2, 5, 2, Duration.ofSeconds(60), 5);

    EnrolmentDemo.Result r = new EnrolmentDemo(settings, out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    assertThat(r.parked()).as(printed).isEqualTo(2);
    assertThat(r.queueLeft()).isZero();
    assertThat(r.differences()).as("the well-formed messages are all applied").isZero();
    assertThat(r.ok()).isFalse();
    assertThat(printed)
        .contains("PARKED", "message malformed-1", "message malformed-2",
            "operation must be 'enrol' or 'unenrol', got enroll")
        .contains("RESULT: FAILED");
  }
}
