package dev.sluice.sink;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;

/**
 * A {@link Handler} that publishes changes to a message broker and lets the listener's checkpoint
 * advance only after the broker acknowledged them (ADR 0041): at least once, in order per
 * partition. {@link #handle} encodes a change with a {@link MessageEncoder} and sends its messages
 * asynchronously; {@link #flush}, which the listener calls before committing a checkpoint, waits
 * until the broker acknowledged every message sent for that partition so far, bounded by the
 * sink's flush timeout.
 *
 * <p>Two kinds of failure are kept apart:
 * <ul>
 *   <li>An outage (the broker is unreachable, does not answer in time, the connection fails) is not
 *       the change's fault: {@code handle} does not throw, {@code flush} throws a {@link
 *       SinkException}, nothing is committed and the listener delivers again from its last
 *       checkpoint. Delivery pauses while the broker is down; nothing is lost or reordered;
 *       duplicates are possible (consumers de-duplicate on the message id, see the inbox).
 *   <li>A change that cannot be published at all (it cannot be encoded, is too large, has no
 *       destination, or the broker refused it for good on an earlier delivery) makes {@code
 *       handle} throw, and the listener's failure policy retries and parks it.
 * </ul>
 *
 * <p>Thread-safe: one sink may serve every partition of a listener; each partition ({@link
 * Fence#lease()}) has its own pending messages. Implementations: {@code KafkaSink} in
 * sluice-kafka, {@code AmqpSink} in sluice-amqp.
 *
 * @param <D> the backend's document type
 */
public interface BrokerSink<D> extends Handler<D>, AutoCloseable {

  /**
   * False: the sink overlaps its sends itself and keeps one partition's changes in one sequence, so a
   * listener refuses {@code concurrency} above 1 for it.
   */
  @Override
  default boolean concurrentCalls() {
    return false;
  }

  /**
   * Publishes the change's messages asynchronously.
   *
   * @throws MessageEncodingException if the change cannot be encoded (or is too large); the
   *     listener's failure policy retries and parks it
   * @throws MessageRejectedException if the broker refused this change for good on an earlier
   *     delivery
   */
  @Override
  void handle(ChangeEvent<D> event, Fence fence);

  /**
   * Waits until the broker acknowledged every message published for {@code fence.lease()}.
   *
   * @throws SinkException if any was not acknowledged in time or refused; the listener then
   *     redelivers from its last checkpoint
   */
  @Override
  void flush(Fence fence);

  /**
   * Closes the broker client, waiting at most the flush timeout for the broker: messages it has not
   * acknowledged by then are dropped (no checkpoint covers them). Returns within the flush timeout
   * even when the broker does not answer.
   */
  @Override
  void close();
}
