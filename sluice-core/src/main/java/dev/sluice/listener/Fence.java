package dev.sluice.listener;

/**
 * The fencing token that comes with every change: the epoch of the lease under which the change
 * is delivered. Side effects carry it so that a target can reject a write from an older epoch
 * once a newer one was applied (see {@code docs/adr/0003-fencing.md}).
 *
 * @param lease the lease name ({@code stream#partition})
 * @param owner the listener instance that holds the lease
 * @param epoch the fencing token; strictly increases every time ownership changes hands
 */
public record Fence(String lease, String owner, long epoch) {

  /**
   * Throws {@link StaleFenceException} for a fenced write that matched nothing: use it where a
   * conditional write reports how many targets it changed.
   */
  public void requireApplied(boolean applied, String target) {
    if (!applied) {
      throw new StaleFenceException(this, target);
    }
  }
}
