package dev.sluice.demo;

import dev.sluice.lease.Lease;
import dev.sluice.listener.ListenerObserver;

/**
 * A node's lease events on standard output for the demo that started it: {@code ACQUIRED <node> epoch=<e>
 * checkpoint=<position>} and {@code LOST <node> epoch=<e> reason=<reason>}.
 */
public class LeaseLines implements ListenerObserver {
  protected final String name;

  public LeaseLines(String name) {
    this.name = name;
  }

  @Override
  public void acquired(Lease lease) {
    System.out.println("ACQUIRED " + name + " epoch=" + lease.epoch() + " checkpoint=" + lease.checkpoint());
  }

  @Override
  public void lost(String lease, long epoch, String reason) {
    System.out.println("LOST " + name + " epoch=" + epoch + " reason=" + reason);
  }
}
