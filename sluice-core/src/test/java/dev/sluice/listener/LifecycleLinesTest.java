package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * A lifecycle line says what happened in its message, not only in key-value pairs a log format
 * may not print: Spring Boot's default format prints the message alone, and there a line that
 * read just {@code acquired} told an operator nothing.
 */
class LifecycleLinesTest {
  private final Logger lifecycle = (Logger) LoggerFactory.getLogger("dev.sluice.lifecycle");
  private final ListAppender<ILoggingEvent> lines = new ListAppender<>();

  @BeforeEach
  void capture() {
    lines.start();
    lifecycle.addAppender(lines);
  }

  @AfterEach
  void release() {
    lifecycle.detachAppender(lines);
  }

  @Test
  void theMessageNamesTheEventThePartitionTheGroupTheStreamAndTheEpoch() {
    InMemoryLeaseStore store = new InMemoryLeaseStore(Clock.systemUTC());
    InMemoryFeed feed = new InMemoryFeed("orders");
    try (Listener<String> listener = EngineTimings.fast(Listener.builder(feed, store).group("totals")
        .partitions(2).handler((change, fence) -> { })).build().start()) {
      await().atMost(Duration.ofSeconds(20)).until(() -> messages().stream()
          .filter(m -> m.startsWith("acquired ")).count() == 2);
      long epoch = store.read("totals/orders#0of2").orElseThrow().epoch();
      assertThat(messages()).contains("acquired stream=orders group=totals partition=0/2 owner="
          + listener.owner() + " epoch=" + epoch + " checkpoint=-");
      assertThat(messages()).anySatisfy(m -> assertThat(m).startsWith("started stream=orders group=totals owner=")
          .endsWith(" partitions=2"));
    }
    assertThat(messages()).anySatisfy(m -> assertThat(m).startsWith("released stream=orders group=totals partition="));
    assertThat(messages()).anySatisfy(m -> assertThat(m).startsWith("stopped stream=orders group=totals owner="));
    // The same facts stay key-value pairs for structured formats.
    assertThat(lines.list).filteredOn(e -> e.getFormattedMessage().startsWith("acquired "))
        .allSatisfy(e -> assertThat(e.getKeyValuePairs()).extracting(kv -> kv.key)
            .containsExactly("stream", "group", "partition", "owner", "epoch", "checkpoint"));
  }

  private List<String> messages() {
    return lines.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
  }
}
