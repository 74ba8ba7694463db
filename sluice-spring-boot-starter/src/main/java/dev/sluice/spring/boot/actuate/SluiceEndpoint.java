package dev.sluice.spring.boot.actuate;

import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.OwnerId;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.spring.boot.Bounded;
import dev.sluice.spring.boot.SluiceListenerContainer;
import dev.sluice.spring.boot.SluiceListeners;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;

/**
 * Actuator endpoint {@code sluice}: the status view of {@code sluice run}'s {@code /status} and
 * {@code sluice status}, per listener of this context. For each partition: how this instance runs
 * it ({@link PartitionStatus}: state, epoch, processed, committed position, lag, history left,
 * last error) and what the lease store holds for it ({@link LeaseRecord}: holder, epoch, expiry,
 * checkpoint), so one instance shows who holds the partitions it does not. {@code
 * /actuator/sluice/<name>} shows one listener. Expose it with {@code
 * management.endpoints.web.exposure.include=health,sluice}.
 */
@Endpoint(id = "sluice")
public final class SluiceEndpoint {
  private final SluiceListeners listeners;
  private final LeaseStore store;
  private final Duration timeout;

  public SluiceEndpoint(SluiceListeners listeners, LeaseStore store, Duration timeout) {
    this.listeners = listeners;
    this.store = store;
    this.timeout = timeout;
  }

  /** Every listener of this context. */
  @ReadOperation
  public Status status() {
    return new Status(listeners.all().stream().map(this::view).toList());
  }

  /** One listener, or nothing (404) if no listener has this name. */
  @ReadOperation
  public ListenerView listener(@Selector String name) {
    return listeners.get(name).map(this::view).orElse(null);
  }

  private ListenerView view(SluiceListenerContainer c) {
    ListenerConfig<?> config = c.listener().config();
    List<PartitionView> partitions = c.status().stream().map(SluiceEndpoint::partition).toList();
    List<LeaseView> records = null;
    String recordsError = null;
    try {
      records = Bounded.call("the lease store", timeout, () -> store.list(config.partitionPrefix())).stream()
          .map(SluiceEndpoint::lease).toList();
    } catch (RuntimeException e) {
      recordsError = String.valueOf(e.getMessage());
    }
    return new ListenerView(c.name(), config.group(), config.feed().stream(), c.listener().owner(), c.isRunning(),
        config.partitions(), partitions, records, recordsError);
  }

  private static PartitionView partition(PartitionStatus p) {
    return new PartitionView(p.lease(), p.state().name(), p.epoch(), p.processed(),
        p.committed() == null ? null : p.committed().token(),
        text(p.committed() == null ? null : p.committed().time()), p.lag().toMillis(),
        p.historyLeft() == null ? null : p.historyLeft().toSeconds(), p.error(), text(p.errorAt()), p.restarts(),
        p.attempts(), text(p.nextAttemptAt()), p.flapping());
  }

  private static LeaseView lease(LeaseRecord r) {
    return new LeaseView(r.name(), r.owner(), r.owner() == null ? null : OwnerId.labelOf(r.owner()), r.epoch(),
        r.isHeld(), text(r.expiresAt()), r.checkpoint() == null ? null : r.checkpoint().token(),
        text(r.checkpoint() == null ? null : r.checkpoint().time()));
  }

  private static String text(Instant t) {
    return t == null ? null : t.toString();
  }

  /** The endpoint's answer. */
  public record Status(List<ListenerView> listeners) {}

  /**
   * One listener: its partitions as this instance runs them, and the store's records of them
   * ({@code records} null and {@code recordsError} set when the store did not answer in time).
   */
  public record ListenerView(String name, String group, String stream, String owner, boolean running,
      int partitionCount, List<PartitionView> partitions, List<LeaseView> records, String recordsError) {}

  /** A partition as this instance runs it ({@link PartitionStatus}). */
  public record PartitionView(String lease, String state, long epoch, long processed, String committed,
      String committedTime, long lagMillis, Long historyLeftSeconds, String error, String errorAt, int restarts,
      int attempts, String nextAttemptAt, boolean flapping) {}

  /** What the lease store holds for a partition: holder, epoch, expiry and checkpoint. */
  public record LeaseView(String name, String holder, String holderLabel, long epoch, boolean held,
      String expiresAt, String checkpoint, String checkpointTime) {}
}
