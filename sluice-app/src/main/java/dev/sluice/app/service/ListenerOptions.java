package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** The options every command about one configured listener shares: the file and the collection. */
public final class ListenerOptions {

  @Option(names = "--config", required = true, description = "YAML configuration file")
  Path configFile;

  @Option(names = "--collection", required = true, description = "the listener's collection")
  String collection;

  @Option(names = "--group", description = "the listener's consumer group; needed when several entries read the collection")
  String group;

  /** Loads the configuration and connects; the caller closes the returned client. */
  Connected connect() {
    SluiceConfig config = ConfigLoader.load(configFile);
    MongoClient client = MongoClients.create(config.mongodb().uri());
    Wiring wiring = new Wiring(config, client);
    return new Connected(client, wiring, wiring.section(collection, group));
  }

  /** A connection to the configured MongoDB and the selected listener section. */
  record Connected(MongoClient client, Wiring wiring, SluiceConfig.ListenerSection section) implements AutoCloseable {
    /** The scope of this entry's dead letters: {@code group/stream}. */
    String deadLetterScope() {
      return wiring.deadLetterScope(section);
    }

    @Override
    public void close() {
      client.close();
    }
  }
}
