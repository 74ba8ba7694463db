package dev.sluice.mongodb.feed;

import com.mongodb.MongoCursorNotFoundException;
import com.mongodb.MongoException;
import com.mongodb.MongoExecutionTimeoutException;
import com.mongodb.MongoInterruptedException;
import com.mongodb.MongoNodeIsRecoveringException;
import com.mongodb.MongoNotPrimaryException;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoServerException;
import com.mongodb.MongoSocketException;
import com.mongodb.MongoTimeoutException;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.Set;
import java.util.function.Supplier;

/** Turns driver exceptions into the feed SPI's exceptions. */
final class MongoFeedErrors {

  static final int CHANGE_STREAM_HISTORY_LOST = 286;
  static final int CHANGE_STREAM_FATAL_ERROR = 280;
  static final int INVALID_RESUME_TOKEN = 260;
  static final int BSON_OBJECT_TOO_LARGE = 10334;

  /**
   * Server errors after which re-opening at the last checkpoint can succeed: the resumable
   * errors of the change streams specification (failover, shutdown, network, stale routing).
   */
  private static final Set<Integer> RESUMABLE_CODES =
      Set.of(6, 7, 43, 63, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388,
          13435, 13436);

  private MongoFeedErrors() {}

  static FeedException translate(
      MongoException e,
      String stream,
      Position at,
      boolean splitting,
      Supplier<Instant> oldestAvailable) {
    int code = e.getCode();
    if (code == CHANGE_STREAM_FATAL_ERROR || code == INVALID_RESUME_TOKEN) {
      // On MongoDB 5.0+ only 286 says the history is gone. 260 and 280 say the server cannot
      // resume this stream at this token: it belongs to another collection or deployment (a
      // checkpoint used for the wrong stream, a restore), or the event it names is not in this
      // stream. Skipping to latest would hide that, so the partition stops naming both sides.
      return new FeedException(
          "MongoDB change stream '"
              + stream
              + "' cannot resume at position "
              + at
              + ": error "
              + code
              + " "
              + codeName(e)
              + ". The resume token does not belong to this stream (a checkpoint written for"
              + " another collection or deployment, or restored from a backup) or names an event"
              + " this stream does not have. Nothing was skipped. Restore the checkpoint written for '"
              + stream
              + "'; if it is lost, delete the group's checkpoint records of it and start it with the"
              + " snapshot bootstrap (BootstrapPolicy.snapshot(), service: bootstrap: snapshot), which delivers"
              + " every document (starting at latest would skip every change since). Server: "
              + e.getMessage(),
          e,
          false);
    }
    if (code == CHANGE_STREAM_HISTORY_LOST) {
      Instant oldest;
      try {
        oldest = oldestAvailable.get();
      } catch (RuntimeException ignored) {
        // Only for the message; the history is lost either way.
        oldest = null;
      }
      return new HistoryLostException(at, oldest, "MongoDB error " + code + " " + codeName(e), e);
    }
    if (code == BSON_OBJECT_TOO_LARGE) {
      return new FeedException(
          "MongoDB change stream '"
              + stream
              + "': the change after position "
              + at
              + " exceeds the 16 MB BSON limit (error 10334 BSONObjectTooLarge), typically a"
              + " large document with full-document lookup or pre-images. "
              + (splitting
                  ? "Large-event splitting is already on: the server did not split it (is it"
                      + " MongoDB 7.0+ / 6.0.9+?). "
                  : "Enable MongoChangeFeed.Builder.splitLargeEvents(true) to add"
                      + " $changeStreamSplitLargeEvent (MongoDB 7.0+ / 6.0.9+), or drop large"
                      + " fields with a $project stage. ")
              + "The cursor cannot pass this change without losing it.",
          e,
          false);
    }
    boolean retryable = isRetryable(e);
    return new FeedException(
        "MongoDB change stream '"
            + stream
            + "' failed after position "
            + at
            + (retryable ? " (transient; re-opening can help): " : " (not retryable): ")
            + dev.sluice.mongodb.internal.MongoErrors.describe(e),
        e,
        retryable);
  }

  static boolean isRetryable(MongoException e) {
    if (e instanceof MongoSecurityException) {
      return false;
    }
    if (e instanceof MongoSocketException
        || e instanceof MongoTimeoutException
        || e instanceof MongoNotPrimaryException
        || e instanceof MongoNodeIsRecoveringException
        || e instanceof MongoCursorNotFoundException
        || e instanceof MongoExecutionTimeoutException
        || e instanceof MongoInterruptedException) {
      return true;
    }
    if (e.hasErrorLabel("ResumableChangeStreamError")
        || e.hasErrorLabel("RetryableWriteError")
        || e.hasErrorLabel("TransientTransactionError")) {
      return true;
    }
    return e instanceof MongoServerException && RESUMABLE_CODES.contains(e.getCode());
  }

  private static String codeName(MongoException e) {
    if (e instanceof MongoServerException s && s.getErrorCodeName() != null) {
      return s.getErrorCodeName();
    }
    switch (e.getCode()) {
      case CHANGE_STREAM_HISTORY_LOST:
        return "ChangeStreamHistoryLost";
      case CHANGE_STREAM_FATAL_ERROR:
        return "ChangeStreamFatalError";
      case INVALID_RESUME_TOKEN:
        return "InvalidResumeToken";
      default:
        return "";
    }
  }
}
