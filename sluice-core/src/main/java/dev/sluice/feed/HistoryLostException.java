package dev.sluice.feed;

import java.time.Instant;

/**
 * The position to resume from is no longer in the source's retained history (MongoDB error
 * 286, or 136 when the oplog rolled past an open cursor; a PostgreSQL slot that was invalidated). Changes between {@link
 * #lostFrom()} and the oldest retained change can no longer be read.
 */
public class HistoryLostException extends FeedException {
  private static final long serialVersionUID = 1L;

  private final transient Position lostFrom;
  private final Instant oldestAvailable;
  private final String reason;

  /**
   * @param lostFrom the position the cursor tried to resume from
   * @param oldestAvailable the source time of the oldest change still retained, if known
   * @param reason the source's own error, such as {@code "MongoDB error 286
   *     ChangeStreamHistoryLost"}
   */
  public HistoryLostException(
      Position lostFrom, Instant oldestAvailable, String reason, Throwable cause) {
    super(
        "History lost: cannot resume after "
            + lostFrom
            + "; oldest retained change is "
            + (oldestAvailable == null ? "unknown" : oldestAvailable)
            + " ("
            + reason
            + "). Changes between these points can no longer be read from the source.",
        cause,
        false);
    this.lostFrom = lostFrom;
    this.oldestAvailable = oldestAvailable;
    this.reason = reason;
  }

  public Position lostFrom() {
    return lostFrom;
  }

  /** Source time of the oldest retained change, or null when the source did not say. */
  public Instant oldestAvailable() {
    return oldestAvailable;
  }

  public String reason() {
    return reason;
  }
}
