/**
 * Distributed locks with fencing tokens, implemented once on top of the lease SPI
 * ({@link dev.sluice.lease.LeaseStore}). Entry point: {@link dev.sluice.lock.LockProvider#on}.
 */
package dev.sluice.lock;
