package dev.sluice.lease;

import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.Objects;

/**
 * What the store holds for a name, whoever holds it; for status and admin tools.
 *
 * @param owner the last holder, or {@code null} if released or never held
 * @param epoch the last epoch granted (0 if never)
 * @param expiresAt expiry on the store's clock, {@code null} if released
 * @param checkpoint last committed position, or {@code null}
 * @param storeTime the store's clock when this record was read, to judge {@link #isHeld()}
 */
public record LeaseRecord(
    String name,
    String owner,
    long epoch,
    Instant expiresAt,
    Position checkpoint,
    Instant storeTime) {
  public LeaseRecord {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(storeTime, "storeTime");
  }

  /** Whether someone held the lease when the record was read (judged on the store's clock). */
  public boolean isHeld() {
    return owner != null && expiresAt != null && expiresAt.isAfter(storeTime);
  }
}
