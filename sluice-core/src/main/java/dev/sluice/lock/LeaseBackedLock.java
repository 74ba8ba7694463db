package dev.sluice.lock;

/** What {@link LeaseLock} and {@link TimedLeaseLock} share: the provider, the name and the lease's epoch as token. */
abstract class LeaseBackedLock implements Lock {
  final LeaseLockProvider provider;
  final String name;
  final long token;

  LeaseBackedLock(LeaseLockProvider provider, String name, long token) {
    this.provider = provider;
    this.name = name;
    this.token = token;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public long token() {
    return token;
  }
}
