package dev.sluice.spring.boot.actuate;

import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.spring.boot.SluiceListenerContainer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/**
 * The health of one listener in this instance, with {@code state} in the details:
 *
 * <ul>
 *   <li>{@code running}: UP; its partitions are held here or compete for ({@code held} says how
 *       many this instance runs);
 *   <li>{@code lagging}: UP, a partition held here is further behind the source than {@code
 *       sluice.health.lag-threshold} ({@code maxLagMillis}); lag is for alerts, not for restarting
 *       the instance, hence not DOWN;
 *   <li>{@code failed}: DOWN, a partition is FAILED, BLOCKED or ENDED and needs a person ({@code
 *       errors} names each);
 *   <li>{@code stopped}: OUT_OF_SERVICE, the listener is not running (not started, or stopped).
 * </ul>
 */
record ListenerHealthIndicator(SluiceListenerContainer container, Duration lagThreshold) implements HealthIndicator {
  private static final Set<PartitionState> NEEDS_A_PERSON =
      EnumSet.of(PartitionState.FAILED, PartitionState.BLOCKED, PartitionState.ENDED);

  @Override
  public Health health() {
    ListenerConfig<?> config = container.listener().config();
    Health.Builder b = new Health.Builder()
        .withDetail("group", config.group())
        .withDetail("stream", config.feed().stream())
        .withDetail("owner", container.listener().owner())
        .withDetail("partitions", config.partitions());
    if (!container.isRunning()) {
      return b.outOfService().withDetail("state", "stopped").build();
    }
    List<PartitionStatus> status = container.status();
    Map<String, String> errors = new LinkedHashMap<>();
    long held = 0;
    Duration maxLag = Duration.ZERO;
    for (PartitionStatus p : status) {
      if (NEEDS_A_PERSON.contains(p.state())) {
        errors.put(p.lease(), p.state() + (p.error() == null ? "" : ": " + p.error()));
      }
      if (p.epoch() > 0 && (p.state() == PartitionState.ACTIVE || p.state() == PartitionState.BLOCKED
          || p.state() == PartitionState.RETRYING)) {
        held++;
        maxLag = p.lag().compareTo(maxLag) > 0 ? p.lag() : maxLag;
      }
    }
    b.withDetail("held", held).withDetail("maxLagMillis", maxLag.toMillis());
    if (!errors.isEmpty()) {
      return b.down().withDetail("state", "failed").withDetail("errors", errors).build();
    }
    if (maxLag.compareTo(lagThreshold) > 0) {
      return b.up().withDetail("state", "lagging").build();
    }
    return b.up().withDetail("state", "running").build();
  }
}
