package dev.sluice.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class MicrometerObserverTest {
  @Test
  void countsDeliveriesFailuresCheckpointsAndActivePartitions() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ListenerObserver observer = ListenerObserver.composite(
        new ListenerObserver() {
          @Override
          public void delivered(ChangeEvent<?> event, long nanos) {
            throw new IllegalStateException("a broken observer must not stop the others");
          }
        },
        new MicrometerObserver(registry, "indexer"));
    ListenerObserver otherGroup = new MicrometerObserver(registry, "cache");
    Position p = new Position("1", Instant.now().minusSeconds(10));
    ChangeEvent<String> e = new ChangeEvent<>("id", "orders", p, Operation.INSERT, "k", "k", "v", p.time(), null);

    observer.stateChanged("orders#0", PartitionState.ACQUIRING, PartitionState.ACTIVE);
    observer.delivered(e, 1_000_000);
    observer.delivered(e, 2_000_000);
    observer.handlerFailed(e, 1, new RuntimeException("x"));
    observer.committed("orders#0", 3, p, 2);
    otherGroup.delivered(e, 1_000_000);

    assertThat(registry.counter("sluice.changes.delivered", "group", "indexer", "stream", "orders").count()).isEqualTo(2);
    assertThat(registry.counter("sluice.changes.delivered", "group", "cache", "stream", "orders").count())
        .as("two consumer groups of one stream are counted apart").isEqualTo(1);
    assertThat(registry.timer("sluice.handler.duration", "group", "indexer", "stream", "orders").count()).isEqualTo(2);
    assertThat(registry.counter("sluice.handler.failures", "group", "indexer", "stream", "orders").count()).isEqualTo(1);
    assertThat(registry.counter("sluice.checkpoints", "lease", "orders#0").count()).isEqualTo(1);
    assertThat(registry.get("sluice.partition.active").tag("lease", "orders#0").gauge().value()).isEqualTo(1);
    assertThat(registry.get("sluice.checkpoint.age.seconds").gauge().value()).isBetween(9.0, 60.0);
  }

  @Test
  void eachPartitionHasOneGaugePerStateWithOneForTheCurrentOneAndFlushesAreTimedByOutcome() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    MicrometerObserver observer = new MicrometerObserver(registry, "indexer");

    observer.stateChanged("orders#0", PartitionState.STOPPED, PartitionState.ACQUIRING);
    observer.stateChanged("orders#0", PartitionState.ACQUIRING, PartitionState.ACTIVE);
    for (PartitionState state : PartitionState.values()) {
      assertThat(registry.get("sluice.partition.state").tags("lease", "orders#0", "state", state.name()).gauge().value())
          .as(state.name()).isEqualTo(state == PartitionState.ACTIVE ? 1 : 0);
    }
    observer.stateChanged("orders#0", PartitionState.ACTIVE, PartitionState.BLOCKED);
    assertThat(registry.get("sluice.partition.state").tags("lease", "orders#0", "state", "BLOCKED").gauge().value())
        .isEqualTo(1);
    assertThat(registry.get("sluice.partition.state").tags("lease", "orders#0", "state", "ACTIVE").gauge().value())
        .isEqualTo(0);

    observer.flushed("orders#0", 10, 3_000_000, null);
    observer.flushed("orders#0", 5, 7_000_000, new RuntimeException("broker down"));
    assertThat(registry.get("sluice.flush.duration").tags("lease", "orders#0", "outcome", "acknowledged").timer()
        .totalTime(java.util.concurrent.TimeUnit.MILLISECONDS)).isEqualTo(3.0);
    assertThat(registry.get("sluice.flush.duration").tags("lease", "orders#0", "outcome", "failed").timer().count())
        .isEqualTo(1);
  }
}
