package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

/**
 * The example configurations the plugin ships in {@code etc/} (one per source) are accepted by the
 * connector's own configuration rules: a key misspelt or a value out of range fails here, not on a
 * user's first try.
 */
class ExampleConfigurationsTest {
  private static final Path ETC = Path.of(System.getProperty("sluice.connect.etc",
      "../sluice-kafka-connect/src/main/plugin/etc"));
  /** Keys of the Connect framework, not of the connector. */
  private static final List<String> FRAMEWORK = List.of("connector.class", "tasks.max", "exactly.once.support",
      "transaction.boundary");

  @Test
  void everyShippedExampleIsValidForTheConnectorAndNamesItsSource() throws Exception {
    List<Path> examples;
    try (Stream<Path> files = Files.list(ETC)) {
      examples = files.filter(p -> p.toString().endsWith(".json")).sorted().toList();
    }
    assertThat(examples).extracting(p -> p.getFileName().toString())
        .containsExactly("sluice-mongodb-source.json", "sluice-postgresql-source.json");
    for (Path example : examples) {
      JsonNode root = new ObjectMapper().readTree(example.toFile());
      assertThat(root.path("name").asText()).as("%s: the connector's name", example).isNotBlank();
      Map<String, String> config = new HashMap<>();
      root.path("config").fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
      assertThat(config.get("connector.class")).isEqualTo(SluiceSourceConnector.class.getName());
      Map<String, String> own = new HashMap<>(config);
      own.keySet().removeIf(k -> FRAMEWORK.contains(k) || k.startsWith("topic.creation."));
      assertThat(SluiceSourceConfig.CONFIG_DEF.names()).as("%s: every key is the connector's", example)
          .containsAll(own.keySet());
      for (ConfigValue value : SluiceSourceConfig.CONFIG_DEF.validate(own)) {
        assertThat(value.errorMessages()).as("%s: %s", example, value.name()).isEmpty();
      }
    }
  }
}
