package dev.sluice.mongodb.feed;

import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import java.time.Duration;

/**
 * What every cursor of one feed is opened with, taken from the feed's builder once.
 *
 * @param stream the stream name (default {@code database.collection})
 * @param batchSize largest number of changes per poll and the driver's batch size
 * @param minBackoff first back-off between empty polls of a server that did not wait
 * @param maxBackoff largest such back-off
 * @param serverAwait how long the server is asked to hold an idle getMore ({@code maxAwaitTimeMS})
 * @param splitLargeEvents whether fragments of split large events are put together
 * @param fullDocument the full-document mode: tells an update's post-image from a lookup
 * @param fullDocumentBeforeChange the pre-image mode
 * @param onInvalidate what a partition does when its collection is dropped or renamed
 * @param onMissingImage what a partition does with a change whose required image is missing
 * @param snapshotChunkSize how many documents one read of a snapshot returns at most
 * @param sharedReads whether a listener's partitions in one process read through one cursor
 */
record CursorSettings(String stream, int batchSize, Duration minBackoff, Duration maxBackoff,
    Duration serverAwait, boolean splitLargeEvents, FullDocument fullDocument,
    FullDocumentBeforeChange fullDocumentBeforeChange, MongoChangeFeed.OnInvalidate onInvalidate,
    MongoChangeFeed.OnMissingImage onMissingImage, int snapshotChunkSize, boolean sharedReads) {

  static CursorSettings of(MongoChangeFeed.Builder b) {
    return new CursorSettings(b.stream, b.batchSize, b.minBackoff, b.maxBackoff, b.serverAwait, b.splitLargeEvents,
        b.fullDocument, b.fullDocumentBeforeChange, b.onInvalidate, b.onMissingImage, b.snapshotChunkSize,
        b.sharedReads);
  }

  /** The image modes that are {@code required}, as a message names them; empty when none is. */
  String requiredImages() {
    boolean post = fullDocument == FullDocument.REQUIRED;
    boolean pre = fullDocumentBeforeChange == FullDocumentBeforeChange.REQUIRED;
    return (pre ? "pre-image (fullDocumentBeforeChange required)" : "") + (pre && post ? " or " : "")
        + (post ? "post-image (fullDocument required)" : "");
  }
}
