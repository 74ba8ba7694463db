package dev.sluice.app.readme;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.Wiring;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The distribution's {@code conf/sluice.example.yaml} is a valid configuration that shows every key
 * the service accepts, each set to its default where it has one, and the README's "Service
 * configuration reference" has a row for every key. The PostgreSQL source is shown commented out
 * (from {@code #postgres:} to the end of that comment): uncommented, it is a valid configuration too.
 */
class ExampleConfigurationTest {
  private static final Path EXAMPLE = Path.of("src/dist/conf/sluice.example.yaml");

  @Test
  void theExampleIsValidAndShowsTheDefaults() throws Exception {
    SluiceConfig c = ConfigLoader.parse(Files.readString(EXAMPLE), EXAMPLE.toString(), name -> null);
    assertThat(c.mongodb().leaseCollection()).isEqualTo(MongoLeaseStore.DEFAULT_COLLECTION);
    assertThat(c.mongodb().deadLetterCollection()).isEqualTo(Wiring.DEFAULT_DEAD_LETTERS);
    assertThat(c.http()).isEqualTo(new SluiceConfig.HttpSection(true, SluiceConfig.HttpSection.DEFAULT_ADDRESS,
        SluiceConfig.HttpSection.DEFAULT_PORT));
    SluiceConfig.ListenerSection l = c.listeners().get(0);
    assertThat(l.partitions()).isEqualTo(1);
    assertThat(ConfigLoader.leaseDuration(l, "x")).isEqualTo(Duration.ofSeconds(10));
    assertThat(ConfigLoader.concurrency(l, "x")).isEqualTo(dev.sluice.listener.ListenerSettings.CONCURRENCY.defaultValue());
    assertThat(ConfigLoader.checkpoint(l, "x")).isEqualTo(CheckpointPolicy.defaults());
    assertThat(ConfigLoader.retry(l, "x")).isEqualTo(RetryPolicy.defaults());
    assertThat(ConfigLoader.bootstrap(l, "x")).isEqualTo(BootstrapPolicy.oldest());
    assertThat(ConfigLoader.historyLost(l, "x")).isEqualTo(HistoryLostPolicy.STOP);
    assertThat(ConfigLoader.ignoreLegacyCheckpoints(l)).isFalse();
  }

  /** The commented-out postgres example, uncommented: the comment lines from {@code #postgres:} on. */
  private static String postgresExample() throws Exception {
    List<String> lines = Files.readAllLines(EXAMPLE);
    StringBuilder out = new StringBuilder();
    for (int i = lines.indexOf("#postgres:"); i >= 0 && i < lines.size() && lines.get(i).startsWith("#"); i++) {
      out.append(lines.get(i).substring(1)).append('\n');
    }
    assertThat(out).as("a commented postgres section in " + EXAMPLE).isNotEmpty();
    return out.toString();
  }

  @Test
  void theCommentedPostgresExampleIsValidAndShowsTheDefaults() throws Exception {
    SluiceConfig c = ConfigLoader.parse(postgresExample(), EXAMPLE + " (postgres)", name -> null);
    assertThat(c.mongodb()).isNull();
    assertThat(c.postgres().url()).isEqualTo("jdbc:postgresql://localhost:5432/shop");
    assertThat(c.postgres().leaseTable()).isEqualTo("sluice_lease");
    assertThat(c.postgres().deadLetterTable()).isEqualTo("sluice_deadletters");
    assertThat(ConfigLoader.sessionLiveness(c.postgres(), "x")).as("session liveness off, as by default").isNull();
    SluiceConfig.ListenerSection l = c.listeners().get(0);
    assertThat(l.table()).isEqualTo("public.orders");
    assertThat(ConfigLoader.bootstrap(l, "x")).isEqualTo(BootstrapPolicy.snapshot());
  }

  @Test
  void theExampleAndTheReadmeShowEveryKey() throws Exception {
    TreeSet<String> accepted = new TreeSet<>();
    keys(SluiceConfig.class, "", accepted);

    TreeSet<String> shown = new TreeSet<>();
    keys(new ObjectMapper(new YAMLFactory()).readTree(Files.readString(EXAMPLE)), "", shown);
    keys(new ObjectMapper(new YAMLFactory()).readTree(postgresExample()), "", shown);
    assertThat(shown).as("keys in " + EXAMPLE).isEqualTo(accepted);
    assertThat(accepted).as("every setting of the listener API (ListenerSettings) is a key of the file")
        .containsAll(dev.sluice.listener.ListenerSettings.all().stream().map(s -> "listeners[]." + s.name()).toList());

    String readme = Files.readString(Path.of("../README.md"));
    assertThat(accepted).allSatisfy(key -> assertThat(readme)
        .as("README.md, section \"Service configuration reference\", row for " + key)
        .contains("| `" + key + "` |"));
  }

  /** The leaf keys of a configuration record: {@code mongodb.uri}, {@code listeners[].checkpoint.every}. */
  private static void keys(Class<?> record, String prefix, TreeSet<String> out) {
    for (RecordComponent c : record.getRecordComponents()) {
      String path = prefix + c.getName();
      Type type = c.getGenericType();
      if (type instanceof ParameterizedType p && p.getRawType() == List.class) {
        keys((Class<?>) p.getActualTypeArguments()[0], path + "[].", out);
      } else if (c.getType().isRecord()) {
        keys(c.getType(), path + ".", out);
      } else {
        out.add(path);
      }
    }
  }

  private static void keys(JsonNode node, String path, TreeSet<String> out) {
    if (node.isObject()) {
      for (Iterator<Map.Entry<String, JsonNode>> i = node.fields(); i.hasNext(); ) {
        Map.Entry<String, JsonNode> e = i.next();
        keys(e.getValue(), path.isEmpty() ? e.getKey() : path + "." + e.getKey(), out);
      }
    } else if (node.isArray()) {
      node.forEach(element -> keys(element, path + "[]", out));
    } else {
      out.add(path);
    }
  }
}
