package dev.sluice.mongodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.listener.Fence;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.sequenced.SequencedValue;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 11 item 10: fenced writes, sequenced values and view targets upsert by {@code _id} alone,
 * which a collection sharded on another key cannot route (a mongos refuses with error 61). Such a
 * target is refused with an error naming the collection and the fix: a view target when the view
 * is built, fenced writes and sequenced values at their first write, with nothing written. Before,
 * the view started and every write failed with the raw driver error, retried as if transient. The
 * embedded server stands in for the mongos (test kit {@code shardCollection}); it starts its own
 * even under {@code -Dsluice.mongodb.uri}.
 */
class ShardedTargetTest {
  private EmbeddedMongo server;
  private MongoClient client;
  private MongoDatabase db;

  @BeforeEach
  void start() {
    server = EmbeddedMongo.start()
        .shardCollection("shop.order_view", "customerId")
        .shardCollection("shop.stock", "warehouse", "_id")
        .shardCollection("shop.prices", "region")
        .shardCollection("shop.by_id", "_id");
    client = server.client();
    db = client.getDatabase("shop");
  }

  @AfterEach
  void stop() {
    client.close();
    server.close();
  }

  @Test
  void aViewWhoseTargetIsShardedOnAnotherKeyIsRefusedWhenBuilt() {
    assertThatThrownBy(() -> MaterializedView.of(db, ViewDefinition.join("order_view")
            .root("orders", "customerId", "amount").build()))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("'shop.order_view'")
        .hasMessageContaining("sharded on a key other than _id")
        .hasMessageContaining("{_id: 1}");
  }

  @Test
  void fencedWritesIntoATargetShardedOnAnotherKeyFailNamingItAndWriteNothing() {
    MongoCollection<Document> stock = db.getCollection("stock");
    assertThatThrownBy(() -> FencedWrites.updateOne(stock, "sku1", Updates.set("count", 3),
            new Fence("orders#0of1", "n1", 7)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("'shop.stock'")
        .hasMessageContaining("could not extract exact shard key");
    assertThat(stock.countDocuments()).isZero();
  }

  @Test
  void sequencedValuesInATargetShardedOnAnotherKeyFailNamingIt() {
    SequencedValue prices = SequencedValue.of(db.getCollection("prices", BsonDocument.class), "price");
    assertThatThrownBy(() -> prices.set(new BsonString("sku1"), new BsonString("9.99"), 1))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("'shop.prices'");
    assertThat(db.getCollection("prices").countDocuments()).isZero();
  }

  @Test
  void givenTheirDatabaseFencedAndSequencedTargetsAreRefusedAtStart() {
    assertThatThrownBy(() -> FencedWrites.requireTarget(db, "stock"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("'shop.stock'");
    assertThatThrownBy(() -> SequencedValue.of(db, "prices", "price"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("'shop.prices'");
    assertThatThrownBy(() -> dev.sluice.mongodb.sequenced.SequencedSet.of(db, "prices", "classes"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("'shop.prices'");
    FencedWrites.requireTarget(db, "by_id");
    FencedWrites.requireTarget(db, "unsharded");
    SequencedValue.of(db, "by_id", "price").set(new BsonString("c"), new BsonString("2"), 1);
  }

  @Test
  void aTargetShardedOnIdTakesEveryKindOfWrite() {
    MongoCollection<Document> byId = db.getCollection("by_id");
    FencedWrites.updateOne(byId, "a", Updates.set("count", 1), new Fence("orders#0of1", "n1", 7));
    SequencedValue.of(db.getCollection("by_id", BsonDocument.class), "price").set(new BsonString("b"), new BsonString("1"), 1);
    MaterializedView.of(db, ViewDefinition.join("by_id").root("orders", "customerId", "amount").build());
    assertThat(byId.countDocuments()).isEqualTo(2);
  }
}
