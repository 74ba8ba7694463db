package dev.sluice.deadletter;

import dev.sluice.ConfigurationException;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Operator actions on a {@link DeadLetterStore}: list, replay and discard parked changes. The
 * API behind the CLI's {@code deadletters} commands; works with any store implementation.
 *
 * <p>Replay runs a handler (the same kind the listener runs, or a sink to another destination)
 * over one key's parked changes in the order they were parked, calling {@link Handler#flush}
 * after each so that a change is removed from the store only once its effect is durable
 * (acknowledged by the broker). It stops at the first failure, leaving that change and every
 * later change of the key parked, so per-key order holds.
 *
 * <p>Replay does not coordinate with a running listener: while a key is being replayed the
 * listener may park further changes of it behind the ones replayed; they are replayed by a
 * later call. Replaying the same key from two processes at once can publish a change twice
 * (at least once, as everywhere in Sluice).
 *
 * @param <D> the backend's document type
 */
public final class DeadLetters<D> {

  /**
   * What a replay did.
   *
   * @param replayed changes handled and removed
   * @param remaining changes of the replayed key(s) still parked
   * @param failedEventId the change that failed, or null if none did
   * @param error the failure (class and message), or null
   */
  public record ReplayResult(int replayed, int remaining, String failedEventId, String error) {
    public boolean complete() {
      return error == null;
    }
  }

  private final DeadLetterStore<D> store;

  private DeadLetters(DeadLetterStore<D> store) {
    this.store = store;
  }

  public static <D> DeadLetters<D> of(DeadLetterStore<D> store) {
    return new DeadLetters<>(ConfigurationException.requireNonNull(store, "store"));
  }

  /** Parked changes of {@code stream}, oldest first. */
  public List<ParkedChange<D>> list(String stream, int limit) {
    return store.list(stream, limit);
  }

  /** Parked changes of one key, in parking order. */
  public List<ParkedChange<D>> listKey(String stream, String key) {
    return store.listKey(stream, key);
  }

  /**
   * Replays one key's parked changes through {@code handler} with {@code fence}, in order,
   * removing each after its {@code flush} succeeded; stops at the first failure.
   */
  public ReplayResult replayKey(String stream, String key, Handler<D> handler, Fence fence) {
    Objects.requireNonNull(handler, "handler");
    Objects.requireNonNull(fence, "fence");
    List<ParkedChange<D>> parked = store.listKey(stream, key);
    int done = 0;
    for (ParkedChange<D> p : parked) {
      try {
        handler.handle(p.event(), fence);
        handler.flush(fence);
      } catch (Exception e) {
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt();
        }
        return new ReplayResult(done, parked.size() - done, p.event().id(), e.toString());
      }
      store.remove(stream, p.event().id());
      done++;
    }
    return new ReplayResult(done, 0, null, null);
  }

  /**
   * Replays every parked key of {@code stream} (up to {@code limit} entries are inspected to
   * find the keys); a key that fails keeps its remaining changes, other keys go on.
   */
  public ReplayResult replayAll(String stream, int limit, Handler<D> handler, Fence fence) {
    return replayAll(stream, limit, handler, fence, (replayed, keysDone, keys) -> { });
  }

  /** Told after each key of {@link #replayAll}: changes replayed so far, keys done, keys in all. */
  @FunctionalInterface
  public interface ReplayProgress {
    void progress(int replayed, int keysDone, int keys);
  }

  /** As {@link #replayAll(String, int, Handler, Fence)}, telling {@code progress} after each key. */
  public ReplayResult replayAll(String stream, int limit, Handler<D> handler, Fence fence,
      ReplayProgress progress) {
    Set<String> keys = new LinkedHashSet<>();
    store.list(stream, limit).forEach(p -> keys.add(p.event().key()));
    int replayed = 0;
    int remaining = 0;
    int keysDone = 0;
    String failedId = null;
    String error = null;
    for (String key : keys) {
      ReplayResult r = replayKey(stream, key, handler, fence);
      replayed += r.replayed();
      remaining += r.remaining();
      if (r.error() != null && error == null) {
        failedId = r.failedEventId();
        error = r.error();
      }
      progress.progress(replayed, ++keysDone, keys.size());
    }
    return new ReplayResult(replayed, remaining, failedId, error);
  }

  /** Discards one parked change without processing it. */
  public boolean discard(String stream, String eventId) {
    return store.remove(stream, eventId);
  }

  /** Discards every parked change of one key; returns how many were removed. */
  public int discardKey(String stream, String key) {
    int n = 0;
    for (ParkedChange<D> p : store.listKey(stream, key)) {
      if (store.remove(stream, p.event().id())) {
        n++;
      }
    }
    return n;
  }
}
