package dev.sluice.app.service;

import dev.sluice.app.cli.ProgressLine;
import org.slf4j.LoggerFactory;
import dev.sluice.app.service.config.ConfigException;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.feed.StartPoint;
import dev.sluice.sink.Replay;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code sluice replay}: re-publishes a range of a collection's changes to a separate topic or
 * exchange, without touching the live listener's lease or checkpoint.
 */
@Command(name = "replay", mixinStandardHelpOptions = true,
    description = "Re-publish changes from a time (up to another time, or until caught up) to a separate destination.")
public final class ReplayCommand implements Callable<Integer> {

  @Mixin ListenerOptions listener;

  @Option(names = "--to", required = true, description = "destination topic (Kafka) or exchange (AMQP); must differ from the live one")
  String destination;

  @Option(names = "--from", required = true, description = "ISO-8601 instant, 'oldest', or 'current': every"
      + " document or row as it is now, as SNAPSHOT changes (the only kind a postgres source has)")
  String from;

  @Option(names = "--until", converter = InstantConverter.class,
      description = "ISO-8601 instant (inclusive); default: until caught up")
  Instant until;

  /** An ISO-8601 instant, or a usage error saying what one looks like (not the JDK's text). */
  static final class InstantConverter implements picocli.CommandLine.ITypeConverter<Instant> {
    @Override
    public Instant convert(String value) {
      try {
        return Instant.parse(value.strip());
      } catch (java.time.format.DateTimeParseException e) {
        throw new picocli.CommandLine.TypeConversionException(
            "must be an ISO-8601 instant such as 2026-01-01T00:00:00Z, but was '" + value + "'");
      }
    }
  }

  @picocli.CommandLine.Spec
  picocli.CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    boolean current = from.equalsIgnoreCase("current");
    StartPoint start = null;
    try {
      if (!current) {
        start = from.equalsIgnoreCase("oldest") ? StartPoint.oldest() : StartPoint.at(Instant.parse(from));
      }
    } catch (java.time.format.DateTimeParseException e) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(),
          "--from must be an ISO-8601 instant such as 2026-01-01T00:00:00Z, 'oldest' or 'current', but was '" + from + "'");
    }
    SluiceConfig config = listener.config();
    if (config.postgres() != null && !current) {
      // A slot starts where it is created: PostgreSQL keeps no history a replay could read again.
      throw new ConfigException(listener.configFile + ": postgres",
          "replay is not available for a postgres source from a time or 'oldest' (a replication slot starts where it"
              + " is created, so there is no past range to read again); --from current publishes every row as it is now");
    }
    if (current && until != null) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--until does not apply to --from current");
    }
    try (ListenerOptions.Connected<?> c = listener.connect(config)) {
      return replay(c, start);
    }
  }

  private <D> int replay(ListenerOptions.Connected<D> c, StartPoint start) {
    return replay(c, start, start == null);
  }

  private <D> int replay(ListenerOptions.Connected<D> c, StartPoint start, boolean current) {
    Wiring<D> wiring = c.wiring();
    ListenerSection section = c.section();
    String live = section.sink().kafka() != null ? section.sink().kafka().topic() : section.sink().amqp().exchange();
    if (live.equals(destination)) {
      System.err.println("--to must differ from the live destination '" + live + "': replays go to a separate one");
      return 2;
    }
    try (Wiring.SinkHandle<D> sink = wiring.sink(section, destination)) {
      if (current) {
        String replayId = "current-" + Instant.now();
        Replay.Result r = wiring.replayCurrentState(section, replayId, sink.handler());
        System.out.printf("replayed the current state, %d document(s) or row(s), to %s as %s%n", r.changes(),
            sink.description(), replayId);
        LoggerFactory.getLogger("dev.sluice.lifecycle").atInfo().addKeyValue("stream", wiring.feed(section).stream())
            .addKeyValue("to", destination).addKeyValue("changes", r.changes()).addKeyValue("replay", replayId)
            .log("replayed");
        return 0;
      }
      ProgressLine progress = new ProgressLine(spec.commandLine().getErr(), 2000);
      Replay.Result r = Replay.range(wiring.feed(section), start, until, Duration.ofSeconds(2), 500, sink.handler(),
          (changes, last) -> progress.update("replaying: " + changes + " change(s) so far, at "
              + (last == null || last.time() == null ? "-" : last.time())
              + (until == null ? " (until caught up)" : " (until " + until + ")")));
      System.out.printf("replayed %d change(s) to %s; last position %s%n", r.changes(), sink.description(), r.last());
      LoggerFactory.getLogger("dev.sluice.lifecycle").atInfo().addKeyValue("stream", c.wiring().feed(section).stream())
          .addKeyValue("to", destination).addKeyValue("changes", r.changes())
          .addKeyValue("last", r.last() == null ? "-" : r.last().token()).log("replayed");
      return 0;
    }
  }
}
