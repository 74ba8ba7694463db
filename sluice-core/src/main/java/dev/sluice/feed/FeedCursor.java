package dev.sluice.feed;

import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * SPI: an open read position on a feed, used by one thread at a time.
 *
 * @param <D> the backend's document type
 */
public interface FeedCursor<D> extends AutoCloseable {

  /**
   * Returns the next changes in feed order, or an empty list if none arrived within
   * {@code maxWait}. Never blocks much longer than {@code maxWait}.
   *
   * @throws HistoryLostException when the cursor's position fell off the retained history
   * @throws FeedException for any other failure of the source; the engine re-opens the cursor at
   *     the last checkpoint after a back-off
   */
  List<ChangeEvent<D>> poll(Duration maxWait);

  /**
   * Where this cursor stands: the position of the last change returned, or further ahead when
   * the source reported progress without changes for this partition (MongoDB post-batch resume
   * token, changes of other partitions). Before the first change it is the start point itself,
   * which is why the engine can pin a bootstrap point by committing it.
   */
  Position position();

  /**
   * True when the last {@link #poll} ended because the source had nothing more at that moment
   * (not because the batch was full or the wait ran out while changes kept coming): once the
   * changes it returned are processed, the partition is caught up, and its lag is zero. The
   * default, false, makes the engine compute the lag from the source's newest time instead.
   */
  default boolean caughtUp() {
    return false;
  }

  /**
   * Tells the source that everything up to {@code committed} is durably processed. A PostgreSQL
   * feed confirms the LSN to the slot here so the server can recycle WAL; MongoDB needs nothing.
   */
  default void acknowledge(Position committed) {}

  /**
   * True once the source ended this stream for good (MongoDB {@code invalidate}: the collection
   * was dropped or renamed). After the last change before the end was returned, {@link #poll}
   * returns nothing more and the engine stops the partition cleanly.
   */
  default boolean ended() {
    return false;
  }

  /**
   * Once {@link #ended()}: what ended the stream and how to continue, for the partition's status
   * and log.
   */
  default String endReason() {
    return "the source ended the stream at " + position();
  }

  /**
   * Lets a few threads serve many partitions (ADR 0075). The engine calls it once after opening
   * the cursor. A cursor that accepts, by returning true, never waits in {@link #poll} for work
   * that another partition does for it (a read through a cursor the partitions of a process
   * share): such a poll returns an empty list at once and leaves the cursor {@link #parked()},
   * and the cursor runs {@code wake} once, from any thread, as soon as a poll can make progress
   * again (changes arrived for it, a failure, or its turn to read). {@code wake} must not block.
   * {@code waitingForThread} says whether the partition's next poll is only waiting for one of the
   * engine's threads (behind other partitions' work): such a partition is slow, not stalled, and a
   * shared reader does not move it to a cursor of its own for that. The default, false, keeps every
   * poll waiting up to its {@code maxWait}.
   */
  default boolean wakeInsteadOfWaiting(Runnable wake, BooleanSupplier waitingForThread) {
    return false;
  }

  /**
   * After a poll that returned nothing: whether the cursor parked and will run the {@code wake}
   * given to {@link #wakeInsteadOfWaiting} (false again once it did). Always false for a cursor
   * that did not accept.
   */
  default boolean parked() {
    return false;
  }

  /**
   * What the cursor fails at and tries again beside reading, while reading goes on, or null when
   * nothing does (MongoDB: reading the group's re-snapshot requests, recording one done). The
   * partition's status shows it as its error; the partition stays as it is, since it delivers.
   */
  default String sideFailure() {
    return null;
  }

  @Override
  void close();
}
