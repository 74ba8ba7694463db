package dev.sluice.app.service;

import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The options every command about one configured listener shares: the file and the collection
 * (or, with a PostgreSQL source, the table).
 */
public final class ListenerOptions {

  @Option(names = "--config", required = true, description = "YAML configuration file")
  Path configFile;

  @Option(names = {"--collection", "--table"}, required = true,
      description = "the listener's collection (MongoDB) or table (PostgreSQL: schema.table)")
  String collection;

  @Option(names = "--group", description = "the listener's consumer group; needed when several entries read the collection")
  String group;

  /** The configuration file, loaded and validated. */
  SluiceConfig config() {
    return ConfigLoader.load(configFile);
  }

  /** Loads the configuration and connects; the caller closes the result. */
  Connected<?> connect() {
    return connect(config());
  }

  /** Connects to {@code config}'s source; the caller closes the result. */
  Connected<?> connect(SluiceConfig config) {
    Wiring<?> wiring = Wiring.connect(config, false);
    try {
      return connected(wiring, wiring.section(collection, group));
    } catch (RuntimeException e) {
      wiring.close();
      throw e;
    }
  }

  private static <D> Connected<D> connected(Wiring<D> wiring, SluiceConfig.ListenerSection section) {
    return new Connected<>(wiring, section);
  }

  /** A connection to the configured source and the selected listener section. */
  record Connected<D>(Wiring<D> wiring, SluiceConfig.ListenerSection section) implements AutoCloseable {
    /** The scope of this entry's dead letters: {@code group/stream}. */
    String deadLetterScope() {
      return wiring.deadLetterScope(section);
    }

    @Override
    public void close() {
      wiring.close();
    }
  }
}
