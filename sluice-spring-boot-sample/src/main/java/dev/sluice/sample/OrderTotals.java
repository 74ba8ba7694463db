package dev.sluice.sample;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.BsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Listener {@code order-totals} (declared in {@code application.yaml}): keeps the total amount of
 * the orders seen. A real handler would write the total with the fence's epoch (fenced writes), so
 * that a replay after a crash cannot count an order twice; here the ids it saw make it idempotent.
 */
@Component("orderTotals")
public class OrderTotals implements Handler<BsonDocument> {
  private static final Logger log = LoggerFactory.getLogger(OrderTotals.class);
  private final Set<String> seen = ConcurrentHashMap.newKeySet();
  private final AtomicLong total = new AtomicLong();

  @Override
  public void handle(ChangeEvent<BsonDocument> change, Fence fence) {
    if (change.operation() == Operation.INSERT && change.document() != null && seen.add(change.key())) {
      long amount = change.document().getNumber("amount").longValue();
      log.info("order {} of {} handled by {} (epoch {}): total {}", change.key(), amount, fence.lease(), fence.epoch(),
          total.addAndGet(amount));
    }
  }

  /** How many orders were counted. */
  public int handled() {
    return seen.size();
  }

  /** The total amount counted. */
  public long total() {
    return total.get();
  }
}
