package dev.sluice.lease;

import dev.sluice.ConfigurationException;
import java.lang.management.ManagementFactory;
import java.util.UUID;

/**
 * Owner identities, the value a lease store compares to decide who holds a lease.
 *
 * <p>A name a user gives ({@code owner("billing")}) is a label for people, never the identity:
 * two processes configured with the same label must never be "the same owner", or both would hold
 * one lease at once (or trade it back and forth forever). An identity is therefore always {@code
 * label/pid@host/random}, unique to the running instance. See {@code
 * docs/adr/0009-consumer-groups-and-owner-identity.md}.
 */
public final class OwnerId {
  private static final int MAX_LABEL = 100;

  private OwnerId() {}

  /**
   * A new identity unique to this instance, carrying {@code label} (or the JVM's {@code pid@host}
   * alone when {@code label} is null) for people reading the store.
   */
  public static String unique(String label) {
    String instance = ManagementFactory.getRuntimeMXBean().getName(); // pid@host
    String random = UUID.randomUUID().toString().substring(0, 8);
    if (label == null) {
      return instance + "/" + random;
    }
    return validLabel(label, "owner") + "/" + instance + "/" + random;
  }

  /** Checks a user-given label: 1..100 characters, not blank, no {@code /}. */
  public static String validLabel(String label, String parameter) {
    ConfigurationException.requireNonNull(label, parameter);
    ConfigurationException.require(!label.isBlank() && label.length() <= MAX_LABEL
            && label.indexOf('/') < 0, parameter, "'" + label + "'",
        "must be 1.." + MAX_LABEL + " characters, not blank, without '/' (it is a label; Sluice"
            + " adds a part unique to the instance)");
    return label;
  }

  /** The label part of an identity made by {@link #unique}, or the whole id if it has none. */
  public static String labelOf(String ownerId) {
    if (ownerId == null) {
      return null;
    }
    int slash = ownerId.indexOf('/');
    return slash < 0 ? ownerId : ownerId.substring(0, slash);
  }
}
