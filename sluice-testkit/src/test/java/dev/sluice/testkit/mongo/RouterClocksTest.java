package dev.sluice.testkit.mongo;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.Updates;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/**
 * The clocks of a staged sharded cluster: {@code $$NOW} is the routing mongos's (it resolves the
 * value and sends it with the command), {@code $currentDate} the server's (the shard applies the
 * update). ADR 0083.
 */
class RouterClocksTest {

  @Test
  void successiveCommandsSeeTheNowOfEachRouterInTurn() {
    try (EmbeddedMongo mongo = EmbeddedMongo.start().routerClockOffsets(Duration.ZERO, Duration.ofHours(1));
        MongoClient client = mongo.client()) {
      MongoCollection<Document> c = client.getDatabase("routers").getCollection("c");
      c.insertOne(new Document("_id", 1));
      List<Duration> seen = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        Instant before = Instant.now();
        Document d = c.aggregate(List.of(new Document("$project", new Document("now", "$$NOW")))).first();
        seen.add(Duration.between(before, d.getDate("now").toInstant()));
      }
      assertThat(seen.get(0)).isLessThan(Duration.ofMinutes(1));
      assertThat(seen.get(1)).isGreaterThan(Duration.ofMinutes(59));
      assertThat(seen.get(2)).isLessThan(Duration.ofMinutes(1));
      assertThat(seen.get(3)).isGreaterThan(Duration.ofMinutes(59));
    }
  }

  /** The stock server set {@code $currentDate} from the process clock, and finer than a millisecond. */
  @Test
  void currentDateOfAClassicUpdateIsTheServersClockInMilliseconds() {
    Clock anHourBehind = Clock.offset(Clock.systemUTC(), Duration.ofHours(-1));
    try (EmbeddedMongo mongo = EmbeddedMongo.start(anHourBehind).routerClockOffsets(Duration.ofHours(2));
        MongoClient client = mongo.client()) {
      MongoCollection<Document> c = client.getDatabase("shard").getCollection("c");
      Document stamped = c.findOneAndUpdate(Filters.eq("_id", "a"), Updates.currentDate("at"),
          new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER));
      Instant at = stamped.getDate("at").toInstant();
      assertThat(Duration.between(anHourBehind.instant(), at).abs()).isLessThan(Duration.ofMinutes(1));
      c.updateOne(Filters.eq("_id", "a"), Updates.currentDate("again"));
      Instant again = c.find(Filters.eq("_id", "a")).first().getDate("again").toInstant();
      assertThat(Duration.between(anHourBehind.instant(), again).abs()).isLessThan(Duration.ofMinutes(1));
      // An equality on the value read back finds the document: what was stored is what was read.
      assertThat(c.countDocuments(Filters.and(Filters.eq("at", stamped.getDate("at")), Filters.eq("again",
          java.util.Date.from(again))))).isEqualTo(1);
    }
  }
}
