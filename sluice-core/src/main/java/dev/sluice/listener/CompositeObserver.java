package dev.sluice.listener;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import java.util.List;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fans callbacks out to several observers, isolating each from the others' failures and the
 * engine from all of them. The engine always calls its observer through one of these.
 */
final class CompositeObserver implements ListenerObserver {
  private static final Logger log = LoggerFactory.getLogger(CompositeObserver.class);
  private final List<ListenerObserver> observers;

  CompositeObserver(List<ListenerObserver> observers) {
    this.observers = List.copyOf(observers);
  }

  private void each(Consumer<ListenerObserver> call) {
    for (ListenerObserver o : observers) {
      try {
        call.accept(o);
      } catch (Throwable e) {
        // An observer must never end a partition or leave a lease renewed with nobody behind
        // it: whatever it throws (an Error too) is logged and ignored.
        log.warn("Listener observer {} threw; ignored", o, e);
      }
    }
  }

  @Override
  public void stateChanged(String lease, PartitionState from, PartitionState to) {
    each(o -> o.stateChanged(lease, from, to));
  }

  @Override
  public void acquired(Lease lease) {
    each(o -> o.acquired(lease));
  }

  @Override
  public void lost(String lease, long epoch, String reason) {
    each(o -> o.lost(lease, epoch, reason));
  }

  @Override
  public void delivered(ChangeEvent<?> event, long handlerNanos) {
    each(o -> o.delivered(event, handlerNanos));
  }

  @Override
  public void committed(String lease, long epoch, Position position, int changes) {
    each(o -> o.committed(lease, epoch, position, changes));
  }

  @Override
  public void flushed(String lease, int changes, long nanos, Throwable failure) {
    each(o -> o.flushed(lease, changes, nanos, failure));
  }

  @Override
  public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
    each(o -> o.handlerFailed(event, attempt, error));
  }

  @Override
  public void parked(ChangeEvent<?> event, String reason) {
    each(o -> o.parked(event, reason));
  }

  @Override
  public void feedFailed(String lease, Throwable error) {
    each(o -> o.feedFailed(lease, error));
  }

  @Override
  public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
    each(o -> o.historyLost(lease, error, resumedAt));
  }

  @Override
  public void streamEnded(String lease, Position at) {
    each(o -> o.streamEnded(lease, at));
  }
}
