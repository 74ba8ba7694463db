package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.ChangeStreamPreAndPostImagesOptions;
import com.mongodb.client.model.CreateCollectionOptions;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Pre-images ({@code fullDocumentBeforeChange}, issue 14 item 4): updates, replacements and
 * deletes carry the document as it was before them where the collection keeps images, and a feed
 * that asks for them of a collection that keeps none is refused naming the fix. Against the
 * embedded server, or a real deployment (MongoDB 6.0+) given {@code -Dsluice.mongodb.uri}.
 */
class PreImagesTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();

  private final MongoDatabase db = MONGO.client().getDatabase("images");
  private final String name = "c" + COLLECTIONS.incrementAndGet();
  private final List<FeedCursor<BsonDocument>> cursors = new ArrayList<>();

  @AfterEach
  void close() {
    cursors.forEach(FeedCursor::close);
  }

  private FeedCursor<BsonDocument> open(FullDocumentBeforeChange mode) {
    FeedCursor<BsonDocument> c = MongoChangeFeed.builder(MONGO.client(), "images", name)
        .fullDocument(FullDocument.WHEN_AVAILABLE).fullDocumentBeforeChange(mode).build()
        .open(PartitionSpec.single(), StartPoint.latest());
    cursors.add(c);
    return c;
  }

  private static List<ChangeEvent<BsonDocument>> read(FeedCursor<BsonDocument> c, int count) {
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (out.size() < count && System.nanoTime() < deadline) {
      out.addAll(c.poll(Duration.ofMillis(100)));
    }
    assertThat(out).hasSize(count);
    return out;
  }

  private static BsonDocument doc(String id, int v) {
    return new BsonDocument("_id", new BsonString(id)).append("v", new BsonInt32(v));
  }

  @Test
  void updatesReplacementsAndDeletesCarryTheDocumentAsItWasBeforeThem() {
    db.createCollection(name, new CreateCollectionOptions()
        .changeStreamPreAndPostImagesOptions(new ChangeStreamPreAndPostImagesOptions(true)));
    MongoCollection<BsonDocument> c = db.getCollection(name, BsonDocument.class);
    FeedCursor<BsonDocument> cursor = open(FullDocumentBeforeChange.REQUIRED);
    c.insertOne(doc("a", 1));
    c.updateOne(Filters.eq("_id", "a"), Updates.set("v", 2));
    c.replaceOne(Filters.eq("_id", "a"), doc("a", 3));
    c.deleteOne(Filters.eq("_id", "a"));

    List<ChangeEvent<BsonDocument>> events = read(cursor, 4);
    assertThat(events).extracting(ChangeEvent::operation)
        .containsExactly(Operation.INSERT, Operation.UPDATE, Operation.REPLACE, Operation.DELETE);
    assertThat(events).extracting(ChangeEvent::before).containsExactly(null, doc("a", 1), doc("a", 2), doc("a", 3));
    assertThat(events.get(1).document()).isEqualTo(doc("a", 2));
    assertThat(events.get(1).documentState()).isEqualTo(DocumentState.AFTER_CHANGE);
  }

  @Test
  void imagesEnabledOnACollectionWithDocumentsGiveTheNextChangesTheirPreImage() {
    MongoCollection<BsonDocument> c = db.getCollection(name, BsonDocument.class);
    c.insertOne(doc("b", 1));
    db.runCommand(new Document("collMod", name).append("changeStreamPreAndPostImages", new Document("enabled", true)));
    FeedCursor<BsonDocument> cursor = open(FullDocumentBeforeChange.WHEN_AVAILABLE);
    c.updateOne(Filters.eq("_id", "b"), Updates.set("v", 2));
    assertThat(read(cursor, 1).get(0).before()).isEqualTo(doc("b", 1));
  }

  @Test
  void askingForPreImagesOfACollectionThatKeepsNoneIsRefusedNamingTheFix() {
    db.getCollection(name).insertOne(new Document("_id", "x"));
    MongoChangeFeed feed = MongoChangeFeed.builder(MONGO.client(), "images", name)
        .fullDocumentBeforeChange(FullDocumentBeforeChange.WHEN_AVAILABLE).build();
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("images." + name)
        .hasMessageContaining("pre-images, which fullDocumentBeforeChange whenAvailable reads")
        .hasMessageContaining("changeStreamPreAndPostImages: {enabled: true}")
        .hasMessageContaining("leave fullDocumentBeforeChange off");
    assertThatThrownBy(() -> MongoChangeFeed.builder(MONGO.client(), "images", name)
        .fullDocumentBeforeChange(FullDocumentBeforeChange.DEFAULT))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("OFF, WHEN_AVAILABLE or REQUIRED");
  }
}
