package dev.sluice.demo.connect;

import dev.sluice.ConfigurationException;
import dev.sluice.app.cli.CommandPlugin;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code sluice connect-demo}: the Kafka Connect source connector on embedded servers, without
 * Docker (ADR 0122). Joins the {@code sluice} command line as a {@link CommandPlugin}, as {@code
 * demo} does (ADR 0115).
 */
@Command(name = "connect-demo", mixinStandardHelpOptions = true,
    description = "The Kafka Connect source connector without Docker: an embedded Kafka broker and MongoDB, a "
        + "one-worker Kafka Connect cluster in this JVM with the packaged plugin on its plugin.path, the plugin's "
        + "example connector (etc/sluice-mongodb-source.json) created with the embedded addresses; writes "
        + "documents and prints the records arriving on the topics, then stops. Exit 0 if every document "
        + "arrived.")
public final class ConnectDemoCommand implements Callable<Integer>, CommandPlugin {

  @Option(names = "--documents", defaultValue = "10", description = "documents to write (default ${DEFAULT-VALUE})")
  int documents;

  @Option(names = "--timeout-seconds", defaultValue = "60",
      description = "how long to wait for every record (default ${DEFAULT-VALUE})")
  long timeoutSeconds;

  @Option(names = "--plugin-path",
      description = "the worker's plugin.path, holding sluice-kafka-connect/ (default: sluice-kafka-connect/target/"
          + "plugin of this checkout, written by: mvn -pl sluice-kafka-connect -am package -Dmaven.test.skip=true)")
  Path pluginPath;

  @Override
  public Integer call() throws Exception {
    ConnectDemo.Settings settings;
    try {
      settings = new ConnectDemo.Settings(documents, Duration.ofSeconds(timeoutSeconds),
          pluginPath != null ? pluginPath : ConnectDemo.Settings.defaultPluginPath());
    } catch (ConfigurationException e) {
      throw new CommandLine.ParameterException(new CommandLine(this), e.getMessage());
    }
    return new ConnectDemo(settings, System.out).run().ok() ? 0 : 1;
  }
}
