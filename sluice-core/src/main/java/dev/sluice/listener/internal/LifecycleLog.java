package dev.sluice.listener.internal;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * One log line per lifecycle event of a listener, on the logger {@value #LOGGER}, for operators to
 * grep and log pipelines to index. The message is the event's name followed by its facts as
 * {@code key=value} ({@code stream}, {@code group}, {@code partition} as {@code i/n}, {@code
 * owner}, {@code epoch}, and per event {@code checkpoint}, {@code reason}, {@code key}, ...), so a
 * log format that prints only the message (Spring Boot's default) shows them; the same facts are
 * SLF4J key-value pairs too, which the service's Logback configuration prints as {@code
 * key="value"} or as JSON fields.
 *
 * <p>Events: {@code started}, {@code stopped} (the listener); {@code acquired} (a partition's first
 * tenure: no checkpoint yet), {@code took-over} (a partition with a checkpoint, left by an earlier
 * tenure of this or another member, which went on from it),
 * {@code released} (handed over or back), {@code lost}, {@code blocked}, {@code failed}, {@code
 * ended}, {@code history-lost}, {@code parked}.
 */
final class LifecycleLog implements ListenerObserver {
  static final String LOGGER = "dev.sluice.lifecycle";
  private static final Logger log = LoggerFactory.getLogger(LOGGER);

  private final ListenerConfig<?> config;
  private final Map<String, String> partitions = new HashMap<>();

  LifecycleLog(ListenerConfig<?> config) {
    this.config = config;
    for (int i = 0; i < config.partitions(); i++) {
      partitions.put(config.leaseName(i), i + "/" + config.partitions());
    }
  }

  private Line event(Level level, String lease) {
    Line line = new Line(log.atLevel(level)).with("stream", config.feed().stream()).with("group", config.group());
    if (lease != null) {
      line.with("partition", partitions.getOrDefault(lease, lease));
    }
    return line.with("owner", config.owner());
  }

  /** One line: each fact goes into the message and into the key-value pairs. */
  private static final class Line {
    private LoggingEventBuilder builder;
    private final StringBuilder facts = new StringBuilder();

    Line(LoggingEventBuilder builder) {
      this.builder = builder;
    }

    Line with(String key, Object value) {
      builder = builder.addKeyValue(key, value);
      String text = String.valueOf(value);
      boolean quote = text.isEmpty() || text.chars().anyMatch(Character::isWhitespace);
      facts.append(' ').append(key).append('=').append(quote ? '"' + text + '"' : text);
      return this;
    }

    void log(String event) {
      builder.log(event + facts);
    }
  }

  void started() {
    event(Level.INFO, null).with("partitions", config.partitions()).log("started");
  }

  void stopped() {
    event(Level.INFO, null).log("stopped");
  }

  @Override
  public void acquired(Lease lease) {
    event(Level.INFO, lease.name()).with("epoch", lease.epoch())
        .with("checkpoint", lease.checkpoint() == null ? "-" : lease.checkpoint().token())
        .log(lease.checkpoint() != null ? "took-over" : "acquired");
  }

  @Override
  public void lost(String lease, long epoch, String reason) {
    event(Level.WARN, lease).with("epoch", epoch).with("reason", reason).log("lost");
  }

  @Override
  public void stateChanged(String lease, PartitionState from, PartitionState to) {
    switch (to) {
      case BLOCKED -> event(Level.WARN, lease).log("blocked");
      case FAILED -> event(Level.ERROR, lease).log("failed");
      case ENDED -> event(Level.WARN, lease).log("ended");
      case STOPPED, ACQUIRING -> {
        if (from == PartitionState.ACTIVE || from == PartitionState.BLOCKED) {
          event(Level.INFO, lease).log("released");
        }
      }
      default -> { }
    }
  }

  @Override
  public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
    event(Level.WARN, lease).with("policy", config.historyLost())
        .with("resumedAt", resumedAt == null ? "-" : resumedAt.token())
        .with("reason", error.getMessage()).log("history-lost");
  }

  @Override
  public void parked(ChangeEvent<?> event, String reason) {
    event(Level.WARN, null).with("key", event.key()).with("change", event.id())
        .with("reason", reason).log("parked");
  }
}
