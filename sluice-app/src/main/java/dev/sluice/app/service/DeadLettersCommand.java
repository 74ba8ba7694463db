package dev.sluice.app.service;

import dev.sluice.app.cli.ProgressLine;
import org.slf4j.LoggerFactory;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.deadletter.DeadLetters;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.sink.Replay;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code sluice dead-letters list|replay|discard}: inspect and resolve parked changes. */
@Command(name = "dead-letters", mixinStandardHelpOptions = true,
    description = "List, replay (through the configured sink) or discard parked changes of a listener.")
public final class DeadLettersCommand implements Callable<Integer> {

  @Parameters(index = "0", description = "list, replay or discard")
  String action;

  @Mixin ListenerOptions listener;

  @Option(names = "--key", description = "only this document key (replay/discard); without it replay takes every key")
  String key;

  @Option(names = "--event", description = "discard only this event id")
  String eventId;

  @Option(names = "--limit", defaultValue = "100", description = "list at most this many (default ${DEFAULT-VALUE})")
  int limit;

  @picocli.CommandLine.Spec
  picocli.CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    if (limit < 1) {
      throw new picocli.CommandLine.ParameterException(spec.commandLine(),
          "--limit must be at least 1, but was " + limit);
    }
    try (ListenerOptions.Connected<?> c = listener.connect()) {
      return run(c);
    }
  }

  private <D> int run(ListenerOptions.Connected<D> c) {
    Wiring<D> wiring = c.wiring();
    ListenerSection section = c.section();
    String stream = c.deadLetterScope();
    DeadLetters<D> dead = DeadLetters.of(wiring.deadLetters());
    switch (action) {
      case "list" -> {
        List<ParkedChange<D>> parked = key == null ? dead.list(stream, limit) : dead.listKey(stream, key);
        System.out.printf("%d parked change(s) in %s%n", parked.size(), stream);
        for (ParkedChange<D> p : parked) {
          System.out.printf("%s key=%s op=%s at=%s attempts=%d parkedAt=%s%n    error: %s%n", p.event().id(),
              p.event().key(), p.event().operation(), p.event().position(), p.attempts(), p.parkedAt(), p.error());
        }
        return 0;
      }
      case "replay" -> {
        try (Wiring.SinkHandle<D> sink = wiring.sink(section, null)) {
          ProgressLine progress = new ProgressLine(spec.commandLine().getErr(), 2000);
          DeadLetters.ReplayResult r = key == null
              ? dead.replayAll(stream, Math.max(limit, 10_000), sink.handler(), Replay.fence(stream),
                  (replayed, keysDone, keys) -> progress.update("replaying parked changes: " + replayed
                      + " replayed, " + keysDone + " of " + keys + " key(s) done"))
              : dead.replayKey(stream, key, sink.handler(), Replay.fence(stream));
          System.out.printf("replayed %d, remaining %d%s%n", r.replayed(), r.remaining(),
              r.error() == null ? "" : "; stopped at " + r.failedEventId() + ": " + r.error());
          LoggerFactory.getLogger("dev.sluice.lifecycle").atInfo().addKeyValue("stream", stream)
              .addKeyValue("replayed", r.replayed()).addKeyValue("remaining", r.remaining())
              .log("dead-letters-replayed");
          return r.complete() ? 0 : 1;
        }
      }
      case "discard" -> {
        if (eventId != null) {
          boolean removed = dead.discard(stream, eventId);
          System.out.println(removed ? "discarded " + eventId : "no parked change " + eventId);
          return removed ? 0 : 1;
        }
        if (key == null) {
          System.err.println("discard needs --event or --key (refusing to discard everything)");
          return 2;
        }
        System.out.printf("discarded %d change(s) of key %s%n", dead.discardKey(stream, key), key);
        return 0;
      }
      default -> {
        System.err.println("unknown action '" + action + "': use list, replay or discard");
        return 2;
      }
    }
  }
}
