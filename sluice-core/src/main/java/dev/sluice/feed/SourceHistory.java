package dev.sluice.feed;

import java.time.Instant;

/**
 * What a source says about the history it retains, for the lag and history-window figures of
 * {@link dev.sluice.listener.PartitionStatus}. Either end may be unknown (null): a source that
 * cannot read its log's oldest entry (no privilege, a sharded cluster), or cannot tell its newest.
 *
 * @param oldest the source time of the oldest change the source can still deliver (MongoDB: the
 *     oldest oplog entry); a position older than this is lost
 * @param newest the source time of the newest change it has, or its current time (MongoDB: the
 *     newest operation time the server reports, else its clock)
 */
public record SourceHistory(Instant oldest, Instant newest) {

  /** Nothing known. */
  public static final SourceHistory UNKNOWN = new SourceHistory(null, null);
}
