package dev.sluice.lease;

import dev.sluice.SluiceException;

/**
 * A renewal, commit or fenced write showed that the lease is no longer held by this owner and
 * epoch: it expired and someone else may have taken it. The holder must stop at once.
 */
public class LeaseLostException extends SluiceException {
  private static final long serialVersionUID = 1L;

  private final String name;
  private final long epoch;

  public LeaseLostException(String name, long epoch, String detail) {
    super("Lease '" + name + "' (epoch " + epoch + ") is lost: " + detail);
    this.name = name;
    this.epoch = epoch;
  }

  public String leaseName() {
    return name;
  }

  public long epoch() {
    return epoch;
  }
}
