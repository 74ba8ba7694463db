package dev.sluice.listener;

/**
 * What to do when the checkpoint fell off the source's retained history.
 *
 * <ul>
 *   <li>{@link #STOP} (default): stop the partition loudly, naming the lost range; an operator
 *       decides (for example re-snapshot, or reset the checkpoint).
 *   <li>{@link #SKIP_TO_LATEST}: continue from the latest position, after reporting the gap to
 *       the {@link ListenerObserver} and the log at ERROR level, with the lost range.
 *   <li>{@link #RESNAPSHOT}: repair the gap: report it as {@code SKIP_TO_LATEST} does, then start
 *       the partition again with a snapshot of its keys ({@code StartPoint.snapshot()}), which
 *       streams from the latest position while it reads every existing document as a {@code
 *       SNAPSHOT} change. Consumers end equal to the source for every document that exists;
 *       documents deleted during the gap are not reported (no change records them any more), so a
 *       consumer that must forget them compares what it holds with the snapshot (see the
 *       README's "Snapshots of a MongoDB collection"). Only for feeds that read snapshots; the
 *       listener refuses it otherwise when built.
 * </ul>
 */
public enum HistoryLostPolicy {
  STOP,
  SKIP_TO_LATEST,
  RESNAPSHOT
}
