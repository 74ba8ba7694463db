package dev.sluice.lease;

/**
 * SPI: a second condition, besides renewing in time, under which the holder of a lease may go on
 * acting, for stores that let a standby take a lease before its expiry when the holder is known to
 * have stopped (docs/adr/0114-sql-lease-holder-session-liveness.md). The standby's rule is the store's;
 * the holder's side is this: the lease's keeper reports the lease lost as soon as
 * {@link #remainingNanos()} is no longer positive, at the latest, exactly as at the lease's local
 * deadline (ADR 0100). A store returns one from {@link LeaseStore#liveness} only for leases it
 * granted under that condition.
 */
public interface HolderLiveness {

  /**
   * How long from now the holder may still act by this condition, in nanoseconds of the monotonic
   * clock; zero or less: stop now. Never blocks and never calls the store: the lease's watchdog
   * calls it.
   */
  long remainingNanos();

  /** Why the holder must stop once {@link #remainingNanos()} ran out, for the loss's message. */
  String lostReason();
}
