package dev.sluice.demo.relay;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The relay demo end to end on the embedded MongoDB, Kafka and AMQP brokers: both relay JVMs
 * are killed with SIGKILL while the broker holds messages beyond their checkpoint, replacements
 * re-publish them, and the consumers' MongoDB inbox removes exactly the duplicates received.
 */
class RelayDemoTest {
  private static final int CHANGES = 600;

  @Test
  void bothBrokersReceiveEveryChangeInOrderAndTheInboxRemovesTheRedeliveries() throws Exception {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buffer, true, StandardCharsets.UTF_8);

    RelayDemo.Result r = new RelayDemo(new RelayDemo.Settings(CHANGES, 30, 400, 20, Duration.ofSeconds(1)), out).run();

    String printed = buffer.toString(StandardCharsets.UTF_8);
    System.out.print(printed);
    assertThat(r.written()).as(printed).isEqualTo(CHANGES);
    assertThat(r.feedChanges()).as("every write is in the source change stream").isEqualTo(CHANGES);
    for (String broker : new String[] {RelayDemo.KAFKA, RelayDemo.AMQP}) {
      RelayDemo.BrokerResult b = r.broker(broker);
      assertThat(b.consumerFailure()).as(broker + "\n" + printed).isNull();
      assertThat(b.lost()).as(broker + " lost\n" + printed).isZero();
      assertThat(b.orderViolations()).as(broker + " per-key order\n" + printed).isZero();
      assertThat(b.notInFeed()).as(broker).isZero();
      assertThat(b.applied()).as(broker + " applied once").isEqualTo(CHANGES);
      // The relay was killed while the broker held messages its checkpoint did not cover: the
      // replacement published them again, and the inbox removed exactly those received twice.
      assertThat(b.kill().forcedRedeliveries()).as(broker + " redeliveries forced\n" + printed).isPositive();
      assertThat(b.duplicatesReceived()).as(broker).isGreaterThanOrEqualTo(b.kill().forcedRedeliveries());
      assertThat(b.duplicatesRemoved()).as(broker).isEqualTo(b.duplicatesReceived());
      assertThat(b.received()).as(broker).isEqualTo(CHANGES + b.duplicatesReceived());
    }
    assertThat(r.ok()).isTrue();
    assertThat(printed).contains("SIGKILL kafka-relay-1").contains("SIGKILL amqp-relay-1").contains("RESULT: OK")
        .containsPattern("\\[\\s*\\d+s\\] written=\\s*\\d+ \\| relayed kafka=");
  }
}
