package dev.sluice.listener.internal;

import dev.sluice.listener.ListenerConfig;

/**
 * The check every partition makes once it holds its lease: does the group have records of another
 * partition count ({@link Tenure#layoutConflict})? Shared by the partitions of one listener, as a
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
      result = Tenure.layoutConflict(config, config.leaseStore().list(config.partitionPrefix()));
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
}
