package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.bson.BsonDocument;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A partition count beyond what the feed or the engine can serve is refused when the listener is
 * built, naming the limit and why (issue 15 item 3), instead of creating workers and lease records
 * until the process runs out of memory.
 */
class PartitionLimitsTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private Listener.Builder<BsonDocument> builder() {
    return Listener.builder(MongoChangeFeed.builder(MONGO.client(), "limits", "orders").build(),
        MongoLeaseStore.builder(MONGO.client().getDatabase("limits")).build()).group("g").handler((c, f) -> { });
  }

  @Test
  void countsBeyondTheEnginesAndTheFeedsLimitsAreRefusedAtBuildTime() {
    assertThatThrownBy(() -> builder().partitions(Integer.MAX_VALUE).build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("partitions must be <= 4096")
        .hasMessageContaining("a worker and a lease record per partition");
    assertThatThrownBy(() -> builder().partitions(MongoChangeFeed.MAX_PARTITIONS + 1).build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("must be <= " + MongoChangeFeed.MAX_PARTITIONS + " for feed limits.orders");
    try (Listener<BsonDocument> atTheLimit = builder().partitions(MongoChangeFeed.MAX_PARTITIONS).build()) {
      assertThat(atTheLimit).isNotNull(); // built, not started: accepted
    }
  }
}
