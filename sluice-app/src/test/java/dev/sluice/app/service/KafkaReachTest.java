package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * A readiness probe of a Kafka broker that does not answer leaves no admin client behind: one
 * kept alive reconnected every 200 ms and logged a warning each time for the life of the process
 * (125 lines in 26 s after one request to /status).
 */
class KafkaReachTest {

  @Test
  void aProbeOfABrokerThatDoesNotAnswerLeavesNoClientReconnectingBehindIt() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort(); // closed again: connections to it are refused
    }
    String servers = "127.0.0.1:" + port;
    try (SinkReach reach = SinkReach.kafka(servers)) {
      assertThat(reach.problem()).startsWith("Kafka at " + servers + " does not answer");
      await().atMost(Duration.ofSeconds(10)).until(() -> adminThreads() == 0);
      assertThat(reach.problem()).as("the next probe asks again").startsWith("Kafka at " + servers + " does not answer");
      await().atMost(Duration.ofSeconds(10)).until(() -> adminThreads() == 0);
    }
  }

  private static long adminThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith("kafka-admin-client-thread")).count();
  }
}
