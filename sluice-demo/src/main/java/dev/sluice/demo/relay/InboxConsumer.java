package dev.sluice.demo.relay;

import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.sink.Envelope;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The consumer side of one broker: every message received is parsed and applied at most once
 * through the MongoDB inbox (keyed on the envelope's message id). "Applying" records the change in
 * the per-key history the verification reads afterwards. The receipts are counted independently
 * of the inbox, so the table can compare duplicates received with duplicates the inbox removed.
 *
 * <p>Called by one delivery thread per broker; the demo's status and verification read from
 * other threads, hence the synchronization.
 */
final class InboxConsumer {
  /** One applied change: its id and the per-key sequence number its document carried. */
  record Applied(String changeId, int seq) {}

  private final String broker;
  private final MongoInbox inbox;
  private final Set<String> receivedIds = new HashSet<>();
  private final Map<String, List<Applied>> appliedPerKey = new HashMap<>();
  private int received;
  private int applied;
  private int droppedByInbox;
  private RuntimeException failure;

  InboxConsumer(String broker, MongoInbox inbox) {
    this.broker = broker;
    this.inbox = inbox;
  }

  /**
   * Handles one message body. Throws if it cannot be parsed or the inbox fails: the caller must
   * then not acknowledge it (nothing is dropped silently), and the demo reports the failure.
   */
  void accept(byte[] body) {
    try {
      Envelope e = Envelope.parse(body);
      synchronized (this) {
        received++;
        receivedIds.add(e.id());
      }
      int seq = e.document() == null ? -1 : e.document().path("seq").asInt(-1);
      boolean ran = inbox.processIfNew(e.id(), () -> {
        synchronized (this) {
          appliedPerKey.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(new Applied(e.changeId(), seq));
          applied++;
        }
      });
      if (!ran) {
        synchronized (this) {
          droppedByInbox++;
        }
      }
    } catch (RuntimeException e) {
      synchronized (this) {
        if (failure == null) {
          failure = e;
        }
      }
      throw e;
    }
  }

  String broker() {
    return broker;
  }

  synchronized int received() {
    return received;
  }

  /** Distinct message ids received. */
  synchronized int distinctReceived() {
    return receivedIds.size();
  }

  synchronized int applied() {
    return applied;
  }

  synchronized int droppedByInbox() {
    return droppedByInbox;
  }

  synchronized RuntimeException failure() {
    return failure;
  }

  synchronized Map<String, List<Applied>> appliedPerKey() {
    Map<String, List<Applied>> copy = new HashMap<>();
    appliedPerKey.forEach((k, v) -> copy.put(k, List.copyOf(v)));
    return copy;
  }
}
