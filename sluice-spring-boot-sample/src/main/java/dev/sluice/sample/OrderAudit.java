package dev.sluice.sample;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.spring.boot.SluiceListener;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.bson.BsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Listener {@code order-audit}, declared by the annotation: a second consumer group of the same
 * collection, which gets every change too, with its own leases and checkpoints.
 */
@Component
public class OrderAudit {
  private static final Logger log = LoggerFactory.getLogger(OrderAudit.class);
  private final Set<String> seen = ConcurrentHashMap.newKeySet();

  @SluiceListener(value = "order-audit", collection = "orders")
  void on(ChangeEvent<BsonDocument> change) {
    seen.add(change.key());
    log.info("audit: {} {} at {}", change.operation(), change.key(), change.time());
  }

  /** How many orders the audit saw. */
  public int seen() {
    return seen.size();
  }
}
