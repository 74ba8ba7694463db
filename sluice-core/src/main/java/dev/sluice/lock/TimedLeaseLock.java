package dev.sluice.lock;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A lock backed by one lease that nobody renews in the background: it runs out at {@code
 * atMostFor} unless extended (docs/adr/0076-timed-locks.md).
 *
 * <p>Two local deadlines on the provider's monotonic ticker bound what the store decided:
 * <ul>
 *   <li>held until: the start of the request that set the expiry plus {@code atMostFor}. The
 *       store set its expiry when it received that request, so this runs out first; after it,
 *       the lock is treated as expired and cannot be extended.
 *   <li>released no earlier than: the answer to that request plus {@code atLeastFor}. The store
 *       granted before the answer arrived, so waiting until then holds the lock at least {@code
 *       atLeastFor} on the store's clock too (a round trip longer at most).
 * </ul>
 */
final class TimedLeaseLock extends LeaseBackedLock implements TimedLock {
  private static final Logger LOG = LoggerFactory.getLogger(TimedLeaseLock.class);

  private Lease lease;
  private volatile long heldUntilNanos;
  private long releasableAtNanos;
  private volatile boolean closed;
  private volatile boolean lost;

  TimedLeaseLock(LeaseLockProvider provider, String name, Lease lease, long sentAtNanos,
      long answeredAtNanos, Duration atMostFor, Duration atLeastFor) {
    super(provider, name, lease.epoch());
    this.lease = lease;
    this.heldUntilNanos = sentAtNanos + atMostFor.toNanos();
    this.releasableAtNanos = answeredAtNanos + atLeastFor.toNanos();
  }

  static void requireTerms(Duration atMostFor, Duration atLeastFor) {
    ConfigurationException.requireNonNull(atMostFor, "atMostFor");
    ConfigurationException.requireNonNull(atLeastFor, "atLeastFor");
    ConfigurationException.require(atMostFor.toMillis() >= 1, "atMostFor", atMostFor,
        "must be at least 1 ms");
    ConfigurationException.require(!atLeastFor.isNegative(), "atLeastFor", atLeastFor,
        "must not be negative");
    ConfigurationException.require(atLeastFor.compareTo(atMostFor) <= 0, "atLeastFor",
        atLeastFor, "must not be above atMostFor " + atMostFor);
  }

  @Override
  public boolean isHeld() {
    return !closed && !lost && provider.ticker.nanos() - heldUntilNanos < 0;
  }

  @Override
  public synchronized boolean extend(Duration atMostFor, Duration atLeastFor) {
    requireTerms(atMostFor, atLeastFor);
    if (closed) {
      throw new IllegalStateException("Lock '" + name + "' (token " + token
          + ") was released; acquire it again instead of extending it");
    }
    if (!isHeld()) {
      lost = true;
      provider.forget(this);
      return false;
    }
    long sentAt = provider.ticker.nanos();
    Lease renewed;
    try {
      renewed = provider.store.renew(lease, atMostFor);
    } catch (LeaseLostException e) {
      lost = true;
      provider.forget(this);
      return false;
    }
    long answeredAt = provider.ticker.nanos();
    if (answeredAt - heldUntilNanos >= 0) {
      // The store took the extension, but the lock had run out on our reckoning while the request
      // was under way: work done meanwhile was not covered. Give it back rather than pretend.
      lost = true;
      provider.forget(this);
      releaseQuietly(renewed);
      return false;
    }
    lease = renewed;
    heldUntilNanos = sentAt + atMostFor.toNanos();
    releasableAtNanos = answeredAt + atLeastFor.toNanos();
    return true;
  }

  @Override
  public void close() {
    Lease current;
    long keepNanos;
    boolean expired;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      current = lease;
      long now = provider.ticker.nanos();
      keepNanos = releasableAtNanos - now;
      expired = now - heldUntilNanos >= 0;
    }
    provider.forget(this);
    if (lost) {
      return;
    }
    if (keepNanos <= 0 || expired) {
      releaseQuietly(current);
      return;
    }
    // Still inside atLeastFor: leave it taken until then by moving its expiry there (owner and
    // epoch must still match, so this can never touch a lease someone else took).
    long keepMillis = (keepNanos + 999_999) / 1_000_000;
    try {
      provider.store.renew(current, Duration.ofMillis(keepMillis));
    } catch (LeaseLostException e) {
      LOG.debug("Lock '{}' (token {}) was already gone at release", name, token);
    } catch (RuntimeException e) {
      LOG.warn("Could not shorten lock '{}' (token {}) to its atLeastFor; it stays taken until its"
          + " atMostFor runs out: {}", name, token, e.toString());
    }
  }

  private void releaseQuietly(Lease current) {
    try {
      provider.store.release(current);
    } catch (RuntimeException e) {
      LOG.warn("Could not release lock '{}' (token {}); it stays taken until it expires: {}",
          name, token, e.toString());
    }
  }

  @Override
  public String toString() {
    String state = closed ? "RELEASED" : isHeld() ? "HELD" : "EXPIRED";
    return "TimedLock[" + name + ", token " + token + ", " + state + "]";
  }
}
