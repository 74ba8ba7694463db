package dev.sluice.mongodb.feed;

import com.mongodb.MongoException;
import com.mongodb.MongoServerException;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.mongodb.internal.MongoErrors;
import java.time.Instant;
import java.util.Set;
import java.util.function.Supplier;

/** Turns driver exceptions into the feed SPI's exceptions. */
final class MongoFeedErrors {

  static final int CHANGE_STREAM_HISTORY_LOST = 286;
  /**
   * The open cursor's oplog position was overwritten (the capped oplog rolled past it between two
   * getMores): the change stream specification lists it as not resumable, but what it says is
   * that the history after the position is gone, as 286 says it when opening.
   */
  static final int CAPPED_POSITION_LOST = 136;
  /** A {@code required} pre- or post-image the server does not have (expired, or never recorded). */
  static final int NO_MATCHING_DOCUMENT = 47;
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

  /**
   * Server errors outside that list which pass too, so that the partition re-opens at its
   * checkpoint and tries again, showing the error, rather than stopping for good. Re-opening is
   * always safe; stopping is for what only an operator can fix.
   *
   * <ul>
   *   <li>26 NamespaceNotFound: the database or collection is not there at this moment (dropped and
   *       being re-created, a restore in progress, a router that has not yet seen the database). It
   *       says nothing about the stream's history and passes once the namespace is back.
   *   <li>134 ReadConcernMajorityNotAvailableYet: the member cannot serve a read at majority (every
   *       change stream reads at majority) for a moment: just started, just elected, or its
   *       committed snapshot went away under a running cursor ("Committed view disappeared while
   *       running operation", in a getMore). Servers from 5.0.16 and 6.0.6 label it
   *       {@code ResumableChangeStreamError} in a getMore and the driver resumes; older 5.0 and 6.0
   *       servers do not.
   *   <li>202 NetworkInterfaceExceededTimeLimit: a router's call to a shard timed out (a slow or
   *       unreachable shard); the driver does not retry it.
   *   <li>237 CursorKilled and 11601 Interrupted: an operator or an automation killed the cursor
   *       ({@code killCursors}, {@code killSessions}) or the operation ({@code killOp}, as tools
   *       that end long-running operations do). The stream is not wrong; its cursor is gone.
   * </ul>
   */
  private static final Set<Integer> PASSING_CODES = Set.of(26, 134, 202, 237, 11601);

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
    if (code == CHANGE_STREAM_HISTORY_LOST || code == CAPPED_POSITION_LOST) {
      Instant oldest;
      try {
        oldest = oldestAvailable.get();
      } catch (RuntimeException ignored) {
        // Only for the message; the history is lost either way.
        oldest = null;
      }
      return new HistoryLostException(at, oldest, "MongoDB error " + code + " " + codeName(e)
          + (code == CAPPED_POSITION_LOST ? ": the oplog rolled past the open cursor's position" : ""), e);
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

  /**
   * A {@code required} image the server does not have, under {@code MissingImage.STOP}: the
   * partition stops naming the change's place, why images go missing and what to do.
   */
  static FeedException missingImage(MongoException e, String stream, Position at, String modes) {
    return new FeedException(
        "MongoDB change stream '"
            + stream
            + "': the change after position "
            + at
            + " has no "
            + modes
            + " (error 47 NoMatchingDocument): the image expired (the cluster's"
            + " changeStreamOptions.preAndPostImages.expireAfterSeconds is shorter than this partition's lag) or"
            + " was never recorded (changeStreamPreAndPostImages was enabled on the collection after the change)."
            + " Nothing was skipped; the partition stops here, and every restart stops here again. To go on, set"
            + " MongoChangeFeed.Builder.onMissingImage(PARK) (connector: mongodb.missing.image=park): the change"
            + " is parked in the dead-letter store with the reason and later changes of its key follow it; or read"
            + " with whenAvailable. So that it does not happen again, raise expireAfterSeconds above the longest"
            + " lag: db.adminCommand({setClusterParameter: {changeStreamOptions: {preAndPostImages:"
            + " {expireAfterSeconds: <seconds>}}}}). Server: "
            + e.getMessage(),
        e,
        false);
  }

  static boolean isRetryable(MongoException e) {
    if (MongoErrors.isTransient(e) || e.hasErrorLabel("ResumableChangeStreamError")) {
      return true;
    }
    return e instanceof MongoServerException
        && (RESUMABLE_CODES.contains(e.getCode()) || PASSING_CODES.contains(e.getCode()));
  }

  private static String codeName(MongoException e) {
    if (e instanceof MongoServerException s && s.getErrorCodeName() != null) {
      return s.getErrorCodeName();
    }
    switch (e.getCode()) {
      case CHANGE_STREAM_HISTORY_LOST:
        return "ChangeStreamHistoryLost";
      case CAPPED_POSITION_LOST:
        return "CappedPositionLost";
      case NO_MATCHING_DOCUMENT:
        return "NoMatchingDocument";
      case CHANGE_STREAM_FATAL_ERROR:
        return "ChangeStreamFatalError";
      case INVALID_RESUME_TOKEN:
        return "InvalidResumeToken";
      default:
        return "";
    }
  }
}
