package dev.sluice.lease;

import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.Objects;

/**
 * A lease held by this process: proof, as of the moment the store granted or renewed it, that
 * {@link #owner()} owns {@link #name()} with fencing token {@link #epoch()}.
 *
 * @param name the leased resource (for a listener partition: {@code stream#partition})
 * @param owner the unique id of the holder (one per listener or lock instance)
 * @param epoch the fencing token; strictly greater than every epoch granted before for this name
 * @param expiresAt when the lease expires, on the store's clock (never the process's clock)
 * @param checkpoint the last committed position, or {@code null} if none was ever committed
 */
public record Lease(String name, String owner, long epoch, Instant expiresAt, Position checkpoint) {
  public Lease {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(owner, "owner");
    Objects.requireNonNull(expiresAt, "expiresAt");
  }

  public Lease withExpiresAt(Instant newExpiry) {
    return new Lease(name, owner, epoch, newExpiry, checkpoint);
  }

  public Lease withCheckpoint(Position newCheckpoint) {
    return new Lease(name, owner, epoch, expiresAt, newCheckpoint);
  }
}
