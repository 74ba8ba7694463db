package dev.sluice.sink.internal;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import dev.sluice.sink.BrokerSink;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageEncodingException;
import dev.sluice.sink.MessageRejectedException;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.SinkException;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The mechanism of a {@link BrokerSink}, written once (ADR 0041, ADR 0111): one {@link Lane} of
 * pending sends per partition ({@link Fence#lease()}); {@link #handle} encodes the change, checks
 * each message, and sends it unless the lane already failed (an outage fails the flush, never the
 * change); {@link #flush} waits for the broker's acknowledgements and reports a failure as a {@link
 * SinkException}; a change the broker refused for good is remembered and refused when it comes
 * again; {@link #close} refuses any later call and closes the broker client.
 *
 * <p>A broker implements only what differs: how a message becomes its client's record ({@link
 * #prepare}), how the record is sent ({@link #send}), how acknowledgements are awaited ({@link
 * #acknowledged}) and how its client is closed ({@link #closeClient}).
 *
 * @param <D> the backend's document type
 * @param <R> the broker's record, ready to send
 * @param <L> the broker's lane: one partition's pending sends
 */
public abstract class AbstractBrokerSink<D, R, L extends AbstractBrokerSink.Lane> implements BrokerSink<D> {
  private static final int REMEMBERED_REJECTIONS = 10_000;

  /** The flush timeout a broker sink's builder starts with. */
  public static final Duration DEFAULT_FLUSH_TIMEOUT = Duration.ofSeconds(30);
  /** How long a flush waits for the broker before the sink says so (at most half the timeout). */
  static final Duration SLOW_ACKNOWLEDGEMENT = Duration.ofSeconds(5);

  /** The broker's name in messages and logs: "Kafka", "AMQP". */
  protected final String broker;
  /** How long a flush waits for acknowledgements; also the bound of every other wait on the broker. */
  protected final Duration flushTimeout;
  /**
   * Guards the broker client and {@link #closed()}: a broker opens its client under this lock after
   * checking {@link #closed()}, so no client is opened after {@link #close}.
   */
  protected final Object clientLock = new Object();

  private final Logger log;
  private final MessageEncoder<D> encoder;
  private final Map<String, L> lanes = new ConcurrentHashMap<>();
  /** Changes the broker refused for good, by change id; bounded, the oldest forgotten first. */
  private final Map<String, MessageRejectedException> rejected =
      Collections.synchronizedMap(
          new LinkedHashMap<>() {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, MessageRejectedException> e) {
              return size() > REMEMBERED_REJECTIONS;
            }
          });
  private volatile boolean closed;

  /**
   * @param broker the broker's name in messages and logs
   * @param logAs the class whose logger reports failed flushes (the broker's public sink type)
   */
  protected AbstractBrokerSink(String broker, Class<?> logAs, MessageEncoder<D> encoder, Duration flushTimeout) {
    this.broker = broker;
    this.log = LoggerFactory.getLogger(logAs);
    this.encoder = encoder;
    this.flushTimeout = flushTimeout;
  }

  @Override
  public final void handle(ChangeEvent<D> event, Fence fence) {
    if (closed) {
      throw new SinkException(broker + " sink is closed");
    }
    MessageRejectedException rejection = rejected.get(event.id());
    if (rejection != null) {
      throw rejection;
    }
    List<OutboundMessage<D>> messages = encoder.encode(event, fence);
    L lane = lanes.computeIfAbsent(fence.lease(), l -> newLane());
    for (OutboundMessage<D> m : messages) {
      R record = prepare(event, m);
      synchronized (lane) {
        if (lane.failure() != null) {
          continue; // the batch already failed; flush reports it and the listener redelivers
        }
        try {
          send(lane, m, record);
        } catch (SinkException outage) {
          ((Lane) lane).failure = outage;
        }
      }
    }
  }

  @Override
  public final void flush(Fence fence) {
    try {
      flushAsync(fence).toCompletableFuture().join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof SinkException failure) {
        throw failure;
      }
      throw new SinkException(broker + " flush failed: " + e.getCause(), e.getCause());
    }
  }

  /**
   * Completes when the broker acknowledged every message sent for this lease since the last flush,
   * or fails with a {@link SinkException} naming what it did not acknowledge in time or refused.
   */
  @Override
  public final CompletionStage<Void> flushAsync(Fence fence) {
    L lane = lanes.get(fence.lease());
    if (lane == null) {
      return CompletableFuture.completedFuture(null);
    }
    CompletionStage<Void> acknowledged;
    try {
      acknowledged = acknowledged(fence.lease(), lane);
    } catch (RuntimeException e) {
      acknowledged = CompletableFuture.failedFuture(e);
    }
    warnIfSlow(fence.lease(), acknowledged.toCompletableFuture());
    return acknowledged.whenComplete((ok, error) -> {
      if (error != null) {
        Throwable failure = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        log.warn("{} flush failed for {}: {}", broker, fence.lease(), failure.getMessage());
      }
    });
  }

  /**
   * Says once, {@link #SLOW_ACKNOWLEDGEMENT} (at most half the flush timeout) into a flush that is
   * still waiting, that the broker has not answered: an outage shows in Sluice's own log then, not
   * only when the flush times out.
   */
  private void warnIfSlow(String lease, CompletableFuture<Void> acknowledged) {
    if (acknowledged.isDone()) {
      return;
    }
    long after = Math.min(SLOW_ACKNOWLEDGEMENT.toMillis(), flushTimeout.toMillis() / 2);
    CompletableFuture.delayedExecutor(after, TimeUnit.MILLISECONDS).execute(() -> {
      if (!acknowledged.isDone()) {
        log.warn("{} has not acknowledged what was sent for {} after {} ms; still waiting, up to"
            + " the flush timeout of {} ms (is the broker reachable?)", broker, lease, after,
            flushTimeout.toMillis());
      }
    });
  }

  @Override
  public final void close() {
    synchronized (clientLock) {
      closed = true;
    }
    closeClient();
    lanes.values().forEach(this::closed);
  }

  /** True once {@link #close} began; check it under {@link #clientLock} before opening a client. */
  protected final boolean closed() {
    return closed;
  }

  /** A new lane, for a partition's first change. */
  protected abstract L newLane();

  /**
   * The broker's record for one message, checked before anything is sent: a message that cannot be
   * sent at all (no destination, too large) throws {@link MessageEncodingException}, which fails
   * the change.
   */
  protected abstract R prepare(ChangeEvent<D> event, OutboundMessage<D> message);

  /**
   * Sends one record and records its pending acknowledgement in the lane; called holding the lane's
   * lock, never after the lane failed.
   *
   * @throws SinkException if the client could not send (an outage: not the change's fault); the
   *     lane then sends nothing until its flush, which fails with this
   */
  protected abstract void send(L lane, OutboundMessage<D> message, R record);

  /**
   * Waits, or arranges to wait, for the broker's acknowledgement of every record sent in the lane
   * since its last flush, at most {@link #flushTimeout}; then clears the lane (and its failure), and
   * after a failure makes sure that what is sent next is not preceded by late retries of what
   * failed. A stage that fails, or a {@link SinkException} thrown here, fails the flush.
   */
  protected abstract CompletionStage<Void> acknowledged(String lease, L lane);

  /** Closes the broker client, waiting at most {@link #flushTimeout}; {@link #closed()} is true. */
  protected abstract void closeClient();

  /** Called for each lane after {@link #closeClient}: releases what the lane holds. */
  protected void closed(L lane) {}

  /**
   * Remembers that the broker refused the change of {@code message} for good: when it is delivered
   * again, {@link #handle} throws {@code rejection} at once so the failure policy parks it instead of
   * retrying the whole batch forever.
   */
  protected final void rejected(OutboundMessage<?> message, MessageRejectedException rejection) {
    rejected.put(message.source().id(), rejection);
  }

  /**
   * Applies a destination function (topic, routing key) to a message, failing the change with an
   * error naming the function when it throws or returns no destination.
   *
   * @param what the destination's name in errors, such as {@code "topic"}
   * @param blankAllowed whether an empty or blank destination is valid
   */
  protected static <M> String destination(ChangeEvent<?> event, M message, Function<? super M, String> function,
      String what, boolean blankAllowed) {
    String destination;
    try {
      destination = function.apply(message);
    } catch (RuntimeException e) {
      throw new MessageEncodingException(event, "the " + what + " function threw", e);
    }
    if (destination == null || (!blankAllowed && destination.isBlank())) {
      throw new MessageEncodingException(event, "the " + what + " function returned no " + what, null);
    }
    return destination;
  }

  /**
   * A message too large for the broker fails its change (parked by the failure policy) instead of
   * failing at the broker.
   *
   * @param estimated whether {@code bytes} is an estimate (said so in the error)
   * @param limitName the setting that sets {@code limit}, named in the error
   */
  protected static void requireSize(ChangeEvent<?> event, OutboundMessage<?> m, long bytes, boolean estimated,
      String limitName, long limit) {
    if (bytes > limit) {
      throw new MessageEncodingException(
          event,
          "message " + m.id() + " is " + (estimated ? "about " : "") + bytes + " bytes, more than " + limitName
              + " " + limit,
          null);
    }
  }

  /**
   * A builder's check of the flush timeout it is given.
   *
   * @throws ConfigurationException naming {@code flushTimeout} unless it is positive
   */
  public static Duration requireFlushTimeout(Duration flushTimeout) {
    ConfigurationException.requireNonNull(flushTimeout, "flushTimeout");
    ConfigurationException.require(
        !flushTimeout.isNegative() && !flushTimeout.isZero(), "flushTimeout", flushTimeout, "must be positive");
    return flushTimeout;
  }

  /** How errors name a message: its id and the change it was made from. */
  protected static String describe(OutboundMessage<?> m) {
    return "message " + m.id() + " of change " + m.source();
  }

  /**
   * One partition's sends since its last flush. The sink sends holding the lane's lock; a broker
   * whose acknowledgements settle on another thread takes it too.
   */
  public abstract static class Lane {
    /** The outage that failed this batch, or null; once set, nothing more is sent until the flush. */
    private SinkException failure;

    protected Lane() {}

    /** The outage that failed this batch since the last flush, or null. */
    public final SinkException failure() {
      return failure;
    }

    /** The outage that failed this batch, or null; the lane sends again after this. */
    public final SinkException takeFailure() {
      SinkException f = failure;
      failure = null;
      return f;
    }
  }
}
