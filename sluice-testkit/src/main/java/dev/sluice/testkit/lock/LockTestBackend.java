package dev.sluice.testkit.lock;

import dev.sluice.lease.LeaseStore;

/**
 * What the multi-JVM lock tests need from a backend, opened the same way in the test JVM and in
 * the child JVMs: the lease store, and a target for fenced writes in the same database (the
 * "downstream system" that must reject a stale holder's late write).
 *
 * <p>Implementations have a public no-argument constructor; {@link #open(String)} receives the
 * argument string the test passed (a JDBC URL, a MongoDB connection string...).
 */
public interface LockTestBackend extends AutoCloseable {

  /** Connects to the backend described by {@code argument}; returns a ready backend. */
  LockTestBackend open(String argument);

  LeaseStore leaseStore();

  /**
   * Writes {@code value} to {@code resource} only if {@code token} is greater than the token of
   * the last write applied to it (e.g. {@code UPDATE ... WHERE fence < ?}); creates the resource
   * with token 0 first if needed.
   *
   * @return whether the write was applied
   */
  boolean fencedWrite(String resource, long token, String value);

  /** The token of the last applied write and its value, as {@code token + "=" + value}. */
  String read(String resource);

  @Override
  void close();
}
