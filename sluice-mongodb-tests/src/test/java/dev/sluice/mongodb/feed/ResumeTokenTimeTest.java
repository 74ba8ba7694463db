package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import org.bson.BsonBinary;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;

/**
 * The cluster time in a resume token, which dates a checkpoint taken from a post-batch resume
 * token (issue 12 items 3 and 4). The token below has the form a MongoDB 6.0 replica set writes:
 * KeyString type byte 82 (timestamp), seconds 0x63A1E5B6, increment 1, then the rest.
 */
class ResumeTokenTimeTest {
  @Test
  void theClusterTimeOfAKeyStringTokenAndNoneForOtherForms() {
    BsonDocument real = new BsonDocument("_data", new BsonString(
        "8263A1E5B6000000012B022C0100296E5A100463C2B3A8AB8D4B7A9F2AA6E1D2C3B4A546645F696400645A1B2C3D4E5F60718293A4B50004"));
    assertThat(MongoEvents.clusterTime(real)).contains(Instant.ofEpochSecond(0x63A1E5B6L));
    assertThat(MongoEvents.clusterTime(new BsonDocument("_data", new BsonString("8263a1e5b600000001"))))
        .as("lower-case hex").contains(Instant.ofEpochSecond(0x63A1E5B6L));

    assertThat(MongoEvents.clusterTime(new BsonDocument("_data", new BsonBinary(new byte[] {1, 2}))))
        .as("a 3.6 BinData token").isEmpty();
    assertThat(MongoEvents.clusterTime(new BsonDocument("_data", new BsonString("8200")))).as("too short").isEmpty();
    assertThat(MongoEvents.clusterTime(new BsonDocument("_data", new BsonString("3C63A1E5B600000001"))))
        .as("another first type").isEmpty();
    assertThat(MongoEvents.clusterTime(new BsonDocument("_data", new BsonString("82ZZZZZZZZ00000001"))))
        .as("not hex").isEmpty();
    assertThat(MongoEvents.clusterTime(new BsonDocument())).isEmpty();
  }
}
