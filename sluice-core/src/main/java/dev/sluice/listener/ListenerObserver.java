package dev.sluice.listener;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;

/**
 * Callbacks for metrics, alerting and tests. Every method defaults to doing nothing; they are
 * called on the partition's worker thread and must be quick and must not throw.
 */
public interface ListenerObserver {

  default void stateChanged(String lease, PartitionState from, PartitionState to) {}

  default void acquired(Lease lease) {}

  /** The lease was lost (renewal or commit rejected, or a fenced write was rejected). */
  default void lost(String lease, long epoch, String reason) {}

  default void delivered(ChangeEvent<?> event, long handlerNanos) {}

  default void committed(String lease, long epoch, Position position, int changes) {}

  /**
   * The handler's flush of {@code changes} changes ended, {@code nanos} after it was asked for: for
   * a broker sink, the time until the broker acknowledged them. Called on the thread that ended the
   * flush (a sink's), not necessarily the partition's.
   *
   * @param failure null when the flush succeeded
   */
  default void flushed(String lease, int changes, long nanos, Throwable failure) {}

  default void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {}

  /** A change was parked in the dead-letter store, either for its own failure or behind its key. */
  default void parked(ChangeEvent<?> event, String reason) {}

  /** The feed failed and the cursor will be re-opened at the last checkpoint. */
  default void feedFailed(String lease, Throwable error) {}

  /**
   * History was lost. With {@link HistoryLostPolicy#SKIP_TO_LATEST} this is the explicit record
   * of the gap: {@code resumedAt} is where delivery continues; with STOP it is null.
   */
  default void historyLost(String lease, HistoryLostException error, Position resumedAt) {}

  /** The source ended the stream (MongoDB invalidate). */
  default void streamEnded(String lease, Position at) {}

  ListenerObserver NOOP = new ListenerObserver() {};

  /** Calls every observer in order; one that throws does not stop the others. */
  static ListenerObserver composite(ListenerObserver... observers) {
    return new CompositeObserver(java.util.List.of(observers));
  }
}
