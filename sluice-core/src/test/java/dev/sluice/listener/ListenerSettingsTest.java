package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/**
 * The catalogue's defaults are the listener's own: a listener built with nothing set runs with
 * them, so a front-end that takes its defaults from the catalogue behaves as the API does.
 */
class ListenerSettingsTest {

  @Test
  void theDefaultsAreThoseOfAListenerBuiltWithNothingSet() {
    Listener<String> listener = Listener.builder(new InMemoryFeed("orders"), new InMemoryLeaseStore(Clock.systemUTC()))
        .group("g").handler((c, f) -> { }).build();
    ListenerConfig<String> c = listener.config();
    assertThat(c.partitions()).isEqualTo(ListenerSettings.PARTITIONS.defaultValue());
    assertThat(c.concurrency()).isEqualTo(ListenerSettings.CONCURRENCY.defaultValue());
    assertThat(c.leaseDuration()).isEqualTo(ListenerSettings.LEASE_DURATION.defaultValue()).isEqualTo(Duration.ofSeconds(10));
    assertThat(c.checkpoint()).isEqualTo(new CheckpointPolicy(ListenerSettings.CHECKPOINT_EVERY.defaultValue(),
        ListenerSettings.CHECKPOINT_MAX_DELAY.defaultValue(), ListenerSettings.CHECKPOINT_HEARTBEAT.defaultValue(),
        ListenerSettings.CHECKPOINT_FLUSHES_IN_FLIGHT.defaultValue()));
    assertThat(c.failure()).isEqualTo(FailurePolicy.block(RetryPolicy.attempts(ListenerSettings.RETRY_ATTEMPTS.defaultValue(),
        ListenerSettings.RETRY_INITIAL_DELAY.defaultValue(), ListenerSettings.RETRY_MAX_DELAY.defaultValue())));
    assertThat(c.bootstrap()).isEqualTo(ListenerSettings.bootstrap(null, "bootstrap"));
    assertThat(c.historyLost()).isEqualTo(ListenerSettings.historyLost(null, "onHistoryLost"));
    assertThat(ListenerSettings.parks(null, "onFailure")).isFalse();
  }

  @Test
  void aRefusedValueIsNamedWithTheRuleAndTheValue() {
    assertThatThrownBy(() -> ListenerSettings.PARTITIONS.check(0, "listeners[0].partitions"))
        .isInstanceOf(ConfigurationException.class).hasMessage("listeners[0].partitions must be in [1, 4096], but was 0");
    assertThatThrownBy(() -> ListenerSettings.LEASE_DURATION.check(Duration.ofMillis(500), "leaseDuration"))
        .hasMessage("leaseDuration must be at least 1s, but was PT0.5S");
    assertThatThrownBy(() -> ListenerSettings.bootstrap("yesterday", "bootstrap"))
        .hasMessage("bootstrap must be oldest, latest, snapshot or an ISO-8601 instant such as 2026-01-01T00:00:00Z,"
            + " but was 'yesterday'");
    assertThatThrownBy(() -> ListenerSettings.historyLost("ignore", "h")).hasMessageContaining("but was 'ignore'")
        .hasMessageContaining("must be stop, skip-to-latest or resnapshot");
  }

  @Test
  void valuesAreReadAsTheFrontEndsWriteThem() {
    assertThat(ListenerSettings.bootstrap(" Latest ", "b")).isEqualTo(BootstrapPolicy.latest());
    assertThat(ListenerSettings.bootstrap("2026-01-01T00:00:00Z", "b"))
        .isEqualTo(BootstrapPolicy.at(Instant.parse("2026-01-01T00:00:00Z")));
    assertThat(ListenerSettings.historyLost("skip-to-latest", "h")).isEqualTo(HistoryLostPolicy.SKIP_TO_LATEST);
    assertThat(ListenerSettings.parks("PARK", "f")).isTrue();
    assertThat(ListenerSettings.THREADS.check(null, "threads")).isNull();
  }

  @Test
  void everySettingHasANameADocAndADefaultItsRuleAccepts() {
    assertThat(ListenerSettings.all()).hasSize(18).allSatisfy(s -> {
      assertThat(s.name()).isNotBlank();
      assertThat(s.doc()).endsWith(".");
    });
    assertThat(ListenerSettings.all()).extracting(Setting::name).doesNotHaveDuplicates();
  }
}
