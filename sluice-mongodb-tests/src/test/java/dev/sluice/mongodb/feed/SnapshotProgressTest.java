package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.Position;
import java.time.Instant;
import org.bson.BsonInt32;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.bson.types.ObjectId;
import org.junit.jupiter.api.Test;

/**
 * Snapshot positions carry what a restart needs to go on: the stream's position, the last
 * {@code _id} handed out, and a re-snapshot's range and request; a checkpoint that is none of
 * these is refused, naming the format.
 */
class SnapshotProgressTest {
  private final StreamStart stream = StreamStart.at(new BsonTimestamp(1_700_000_000, 7));
  private final Position streamPosition = stream.toPosition(Instant.ofEpochSecond(1_700_000_000));

  @Test
  void aReSnapshotPositionNamesItsRangeAndRequestAndReadsBackTheSame() {
    SnapshotScope scope = new SnapshotScope(new BsonInt32(100), new BsonString("k"), new BsonObjectId(new ObjectId()));
    Position at = SnapshotProgress.after(streamPosition, scope).apply(new BsonInt32(150));

    SnapshotProgress back = SnapshotProgress.fromPosition(at);
    assertThat(back.after()).isEqualTo(new BsonInt32(150));
    assertThat(back.scope()).isEqualTo(scope);
    assertThat(back.stream()).isEqualTo(stream);
    assertThat(at.time()).isEqualTo(streamPosition.time());
    assertThat(SnapshotProgress.fromPosition(SnapshotProgress.atStart(streamPosition, scope)))
        .isEqualTo(new SnapshotProgress(stream, null, scope));
  }

  @Test
  void aBootstrapPositionHasNoScopeFields() {
    Position at = SnapshotProgress.after(streamPosition, SnapshotScope.ALL).apply(new BsonInt32(3));
    assertThat(at.token()).doesNotContain("from", "to\"", "request");
    assertThat(SnapshotProgress.fromPosition(at).scope()).isEqualTo(SnapshotScope.ALL);
  }

  @Test
  void aCheckpointWithFieldsOfNoSnapshotIsRefused() {
    Position foreign = new Position("{\"snapshot\": {\"stream\": " + streamPosition.token() + ", \"until\": 3}}", null);
    assertThatThrownBy(() -> SnapshotProgress.fromPosition(foreign))
        .isInstanceOf(FeedException.class)
        .hasMessageContaining("is not a MongoDB snapshot position");
  }
}
