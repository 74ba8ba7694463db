package dev.sluice.listener.internal;

import dev.sluice.lease.LeaseRecord;
import dev.sluice.listener.ListenerConfig;
import java.util.List;

/**
 * The check every partition makes once it holds its lease: does the group have records of another
 * partition count ({@link #conflict})? Shared by the partitions of one listener, as a
 * group commit: one list of the group's records answers every partition that acquired its lease
 * before that list started, so 1,000 partitions acquired at once cost a few lists of the group's
 * records instead of 1,000 (each of 1,000 records). A partition never takes an answer from a list
 * that started before it held its lease: then a peer configured with another count, acquiring at the
 * same moment, is seen by one side or the other.
 */
final class LayoutCheck {
  private final ListenerConfig<?> config;
  private boolean listing;
  private boolean answered;
  /** When the last answered list started (System.nanoTime). */
  private long answeredFrom;
  private String answer;

  LayoutCheck(ListenerConfig<?> config) {
    this.config = config;
  }

  /**
   * The conflict, or null, from a list of the group's records that started at or after
   * {@code heldSince} (System.nanoTime): a list in flight that started later is waited for, else
   * one is made.
   *
   * @throws RuntimeException what the lease store threw (the caller retries)
   */
  String conflictSince(long heldSince) {
    long started;
    synchronized (this) {
      while (true) {
        if (answered && answeredFrom - heldSince >= 0) {
          return answer;
        }
        if (!listing) {
          break;
        }
        try {
          wait(100);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new dev.sluice.SluiceException("interrupted while checking the layout of group '"
              + config.group() + "'");
        }
      }
      listing = true;
      started = System.nanoTime();
    }
    String result = null;
    try {
      result = conflict(config, config.leaseStore().list(config.partitionPrefix()));
      synchronized (this) {
        answered = true;
        answeredFrom = started;
        answer = result;
      }
      return result;
    } finally {
      synchronized (this) {
        listing = false;
        notifyAll();
      }
    }
  }

  /** A message naming the conflicting records, or null if every record agrees with the config. */
  static String conflict(ListenerConfig<?> config, List<LeaseRecord> records) {
    String prefix = config.partitionPrefix();
    for (LeaseRecord r : records) {
      String suffix = r.name().substring(prefix.length());
      int of = suffix.indexOf("of");
      int count;
      try {
        count = of < 0 ? -1 : Integer.parseInt(suffix.substring(of + 2));
      } catch (NumberFormatException e) {
        continue; // not a partition record of this scheme
      }
      if (count > 0 && count != config.partitions() && (r.isHeld() || r.checkpoint() != null)) {
        return "group '" + config.group() + "' of stream '" + config.feed().stream()
            + "' already has partition records for " + count + " partitions (" + r.name()
            + (r.isHeld() ? ", held by " + r.owner() : "") + ", checkpoint " + r.checkpoint()
            + "), but this listener is configured with " + config.partitions()
            + ". Every member of a group must use the same partition count. To change it, stop"
            + " every member and delete the group's records (their names start with '" + prefix
            + "'), or use a new group, which starts per its bootstrap policy"
            + kept(config, count);
      }
    }
    return null;
  }

  /** What the feed keeps for the other layout (replication slots), as a sentence to append, or "". */
  private static String kept(ListenerConfig<?> config, int partitions) {
    String kept = config.feed().keptByLayout(partitions);
    return kept == null || kept.isEmpty() ? "" : ". " + kept;
  }
}
