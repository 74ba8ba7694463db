package dev.sluice.listener;

import dev.sluice.SluiceException;

/**
 * A fenced write was rejected because the target already holds a write from a newer epoch (or
 * source version): another listener owns this partition now. Thrown from a handler, it makes the
 * engine stop the partition at once without retrying, as the seed's figure 3 requires.
 */
public class StaleFenceException extends SluiceException {
  private static final long serialVersionUID = 1L;

  private final Fence fence;

  public StaleFenceException(Fence fence, String target) {
    super(
        "Fenced write to "
            + target
            + " rejected: it already holds a newer write than epoch "
            + fence.epoch()
            + " of lease '"
            + fence.lease()
            + "'; this listener no longer owns the partition");
    this.fence = fence;
  }

  public Fence fence() {
    return fence;
  }
}
