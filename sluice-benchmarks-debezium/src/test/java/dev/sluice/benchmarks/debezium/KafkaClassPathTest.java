package dev.sluice.benchmarks.debezium;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.file.FileStreamSourceConnector;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.transforms.Cast;
import org.junit.jupiter.api.Test;

/**
 * The parent POM manages Kafka's artifacts at 3.9 for the rest of the build; this module runs
 * Debezium, which needs Kafka Connect 4.x. Connect 3.9 beside kafka-clients 4.x compiles and fails
 * at run time (JsonConverter: {@code NoSuchMethodError: Utils.mkSet}), so the module manages every
 * Kafka artifact at Debezium's version; this test holds the class path to it.
 */
class KafkaClassPathTest {
  @Test
  void everyKafkaJarIsTheVersionOfKafkaClients() {
    String clients = AppInfoParser.getVersion();
    assertThat(clients).startsWith("4.");
    for (Class<?> c : new Class<?>[] {Struct.class, JsonConverter.class, Worker.class, Cast.class,
        FileStreamSourceConnector.class}) {
      Path jar = Path.of(c.getProtectionDomain().getCodeSource().getLocation().getPath());
      assertThat(jar.getFileName().toString()).as("the jar of %s", c.getName()).endsWith("-" + clients + ".jar");
    }
  }

  @Test
  void jsonConverterRunsAgainstTheseClients() {
    // The call that failed with NoSuchMethodError (Utils.mkSet) when connect-json was 3.9.
    JsonConverter converter = new JsonConverter();
    converter.configure(Map.of("schemas.enable", "true"), false);
    Schema schema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("note", Schema.STRING_SCHEMA).build();
    byte[] json = converter.fromConnectData("t", schema, new Struct(schema).put("id", 7L).put("note", "a"));
    assertThat(new String(json, StandardCharsets.UTF_8)).contains("\"payload\":{\"id\":7,\"note\":\"a\"}");
  }
}
