package dev.sluice.spring.boot;

import dev.sluice.listener.Handler;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.bson.BsonDocument;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * The start-up time the starter adds to an empty Spring Boot application (docs/benchmarks.md,
 * "Spring Boot starter: start-up time"). One JVM, one embedded MongoDB; each round starts and
 * closes three applications in turn, each with full auto-configuration and a MongoDB URI:
 * without the starter's auto-configurations (excluded), with them (lease store, lock provider,
 * health, endpoint), and with them and one listener. Timed: {@code SpringApplication.run} until it
 * returns (context refreshed, listeners started). Warm-up rounds first, so class loading and JIT
 * are out of the figure; medians and spread of the measured rounds.
 *
 * <pre>
 * mvn -B -ntp -o -q -pl sluice-spring-boot-starter test-compile exec:java -Dexec.classpathScope=test \
 *     -Dexec.mainClass=dev.sluice.spring.boot.StartupTimeMain [-Dexec.args="5 20"]
 * </pre>
 */
public final class StartupTimeMain {
  private static final String SLUICE = String.join(",", SluiceMongoAutoConfiguration.class.getName(),
      SluiceJdbcAutoConfiguration.class.getName(), SluiceAutoConfiguration.class.getName(),
      dev.sluice.spring.boot.actuate.SluiceActuatorAutoConfiguration.class.getName());

  /** An empty application. */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class Empty {}

  /** An application with one handler bean, for the listener variant. */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class OneListener {
    @Bean
    Handler<BsonDocument> orderHandler() {
      return (change, fence) -> { };
    }
  }

  public static void main(String[] args) {
    int warmup = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 20;
    try (EmbeddedMongo mongo = EmbeddedMongo.start()) {
      String uri = mongo.connectionString() + "/startup";
      Map<String, Supplier<SpringApplicationBuilder>> variants = new LinkedHashMap<>();
      variants.put("empty Boot application (Sluice auto-configuration excluded)",
          () -> app(Empty.class, uri, "spring.autoconfigure.exclude=" + SLUICE));
      variants.put("with the starter (lease store, lock provider, health, endpoint)", () -> app(Empty.class, uri));
      variants.put("with the starter and one listener (1 partition)", () -> app(OneListener.class, uri,
          "sluice.listeners.orders.handler=orderHandler", "sluice.listeners.orders.collection=orders"));
      Map<String, List<Double>> millis = new LinkedHashMap<>();
      variants.keySet().forEach(k -> millis.put(k, new ArrayList<>()));
      for (int round = 0; round < warmup + rounds; round++) {
        for (Map.Entry<String, Supplier<SpringApplicationBuilder>> v : variants.entrySet()) {
          SpringApplicationBuilder builder = v.getValue().get();
          long start = System.nanoTime();
          ConfigurableApplicationContext context = builder.run();
          long took = System.nanoTime() - start;
          context.close();
          if (round >= warmup) {
            millis.get(v.getKey()).add(took / 1e6);
          }
        }
      }
      System.out.printf("%nStart-up time, %d rounds after %d warm-up rounds, one JVM (%s, %d cores)%n", rounds, warmup,
          System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
      double baseline = median(millis.values().iterator().next());
      millis.forEach((name, values) -> {
        double[] s = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        double median = median(values);
        System.out.printf("  %-66s median %6.1f ms  (p25 %6.1f, p75 %6.1f, min %6.1f, max %6.1f)  +%5.1f ms%n", name,
            median, s[s.length / 4], s[(3 * s.length) / 4], s[0], s[s.length - 1], median - baseline);
      });
    }
  }

  private static SpringApplicationBuilder app(Class<?> type, String uri, String... properties) {
    List<String> all = new ArrayList<>(List.of("spring.main.banner-mode=off", "spring.data.mongodb.uri=" + uri,
        "logging.level.root=WARN", "logging.level.dev.sluice=WARN"));
    all.addAll(Arrays.asList(properties));
    return new SpringApplicationBuilder(type).web(WebApplicationType.NONE).logStartupInfo(false)
        .properties(all.toArray(String[]::new));
  }

  private static double median(List<Double> values) {
    double[] s = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }
}
