package dev.sluice.listener;

/**
 * What to do when the checkpoint fell off the source's retained history.
 *
 * <ul>
 *   <li>{@link #STOP} (default): stop the partition loudly, naming the lost range; an operator
 *       decides (for example re-snapshot, or reset the checkpoint).
 *   <li>{@link #SKIP_TO_LATEST}: continue from the latest position, after reporting the gap to
 *       the {@link ListenerObserver} and the log at ERROR level, with the lost range.
 * </ul>
 */
public enum HistoryLostPolicy {
  STOP,
  SKIP_TO_LATEST
}
