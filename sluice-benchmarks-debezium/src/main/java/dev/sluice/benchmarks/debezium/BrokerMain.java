package dev.sluice.benchmarks.debezium;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * The test kit's embedded Kafka broker in a JVM of its own, on sluice-kafka39-broker's class path
 * (Kafka 3.9: it cannot load beside this module's Kafka 4.x). Prints {@code BROKER <bootstrap>}
 * and stops when its standard input closes. Reflection, because this module's class path has the
 * test kit without its Kafka.
 */
public final class BrokerMain {
  private BrokerMain() {}

  public static void main(String[] args) throws Exception {
    Class<?> kafka = Class.forName("dev.sluice.testkit.kafka.EmbeddedKafka");
    try (AutoCloseable broker = (AutoCloseable) kafka.getMethod("start").invoke(null)) {
      System.out.println("BROKER " + kafka.getMethod("bootstrapServers").invoke(broker));
      System.out.flush();
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      while (in.readLine() != null) {
        // until the parent closes our input (or dies)
      }
    }
  }
}
