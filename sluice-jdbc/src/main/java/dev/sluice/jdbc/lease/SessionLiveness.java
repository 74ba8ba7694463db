package dev.sluice.jdbc.lease;

import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.LeaseStoreException;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder's side of session liveness (docs/adr/0114-sql-lease-holder-session-liveness.md):
 * one connection of the store's own, held for the store's life, whose server session the store
 * records in every lease it grants ({@link SessionSql.Session}), and confirms alive every quarter of the bound
 * from a daemon thread. A lease granted with a session may be acted on only while that session was
 * confirmed less than the bound ago, by the send time of the confirmation on the monotonic clock
 * ({@link #holderLiveness}); a standby may take it early only a bound after it found the session
 * gone, which is after the server answered the last confirmation, so the holder has stopped by then
 * whatever ended the session (a crash, {@code pg_terminate_backend}, a restart, a network cut).
 */
final class SessionLiveness implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(SessionLiveness.class);

  private final DataSource dataSource;
  private final long boundNanos;
  /** How much earlier than the bound the holder stops (rates of two monotonic clocks, scheduling). */
  private final long marginNanos;
  private final long everyNanos;
  private final Object firstConfirmation = new Object();
  private volatile SessionSql.Session current;
  /** Send time (System.nanoTime) of the last confirmation of {@link #current} that was answered. */
  private volatile long confirmedNanos;
  private volatile boolean closed;
  /** Why the first session could not be opened where it must be (a replica, a Galera node), or null. */
  private volatile String refused;
  private Thread thread;
  /** The database's way of naming and confirming a session; set by the first {@link #start}. */
  private volatile SessionSql sql;
  /** The liveness connection; only the thread touches it. */
  private Connection connection;

  SessionLiveness(DataSource dataSource, Duration bound) {
    this.dataSource = dataSource;
    this.boundNanos = bound.toNanos();
    this.marginNanos = Math.max(boundNanos / 20, TimeUnit.MILLISECONDS.toNanos(5));
    this.everyNanos = boundNanos / 4;
  }

  /** How often a standby's watch asks for sessions gone: as often as the holder confirms its own. */
  long pollNanos() {
    return everyNanos;
  }

  long boundMillis() {
    return TimeUnit.NANOSECONDS.toMillis(boundNanos);
  }

  /**
   * The session to record in a lease granted now: the current one if it is confirmed within the
   * bound, else null (the lease is then judged by its expiry alone). Starts the confirmations on
   * first use and waits for the first at most {@code waitMillis}.
   */
  SessionSql.Session sessionForGrant(SessionSql sql, long waitMillis) {
    start(sql);
    if (current == null && refused == null) {
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMillis);
      synchronized (firstConfirmation) {
        while (current == null && refused == null && !closed) {
          long left = until - System.nanoTime();
          if (left <= 0) {
            break;
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(firstConfirmation, left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
      }
    }
    if (refused != null) {
      throw new LeaseStoreException("SqlLeaseStore sessionLiveness cannot work with this DataSource: " + refused
          + " (docs/adr/0114-sql-lease-holder-session-liveness.md)", false, null);
    }
    SessionSql.Session s = current;
    return s != null && remainingNanos(s) > 0 ? s : null;
  }

  /** The condition under which the holder of a lease granted with {@code session} may act. */
  HolderLiveness holderLiveness(SessionSql.Session session) {
    return new HolderLiveness() {
      @Override
      public long remainingNanos() {
        return SessionLiveness.this.remainingNanos(session);
      }

      @Override
      public String lostReason() {
        return "its database session (id " + session.id() + ", started " + session.since()
            + ") was not confirmed alive within the session-liveness bound of "
            + Duration.ofNanos(boundNanos) + (session.equals(current) ? "" : ": it has ended")
            + "; a standby may take the lease once it finds the session gone (ADR 0114)";
      }
    };
  }

  private long remainingNanos(SessionSql.Session session) {
    if (closed || !session.equals(current)) {
      return 0;
    }
    return confirmedNanos + boundNanos - marginNanos - System.nanoTime();
  }

  private synchronized void start(SessionSql sql) {
    if (thread != null || closed) {
      return;
    }
    this.sql = sql;
    thread = new Thread(this::run, "sluice-lease-session");
    thread.setDaemon(true);
    thread.start();
  }

  private void run() {
    long backoff = everyNanos;
    while (!closed) {
      long send = System.nanoTime();
      try {
        SessionSql.Session opened = null;
        if (connection == null) {
          connection = open();
          String refusal = sql.refusal(connection);
          if (refusal != null) {
            if (current == null) {
              // Before any session: how it is configured. Grants fail, naming it; no retry helps.
              refused = refusal;
              log.error("Lease-store session liveness refused: {}", refusal);
              synchronized (firstConfirmation) {
                firstConfirmation.notifyAll();
              }
              break;
            }
            // After a failover, a reconnection can land on a replica for a while: not confirmed.
            throw new SQLException(refusal);
          }
          opened = sql.open(connection);
        }
        SessionSql.Session s = opened != null ? opened : sql.confirm(connection, current);
        if (!s.equals(current)) {
          if (current != null) {
            log.warn("Lease-store session {} ended; leases granted with it are lost, new ones use {}",
                current, s);
          }
          current = s;
        }
        confirmedNanos = send;
        synchronized (firstConfirmation) {
          firstConfirmation.notifyAll();
        }
        backoff = everyNanos;
        LockSupport.parkNanos(everyNanos - (System.nanoTime() - send));
      } catch (SQLException | RuntimeException e) {
        if (closed) {
          break;
        }
        log.warn("Cannot confirm the lease store's database session ({}); leases granted with it stop"
            + " within {} ms unless a confirmation gets through", e.toString(), boundMillis());
        closeQuietly(connection);
        connection = null;
        LockSupport.parkNanos(backoff);
        backoff = Math.min(backoff * 2, Math.max(everyNanos, TimeUnit.SECONDS.toNanos(5)));
      }
    }
    closeQuietly(connection);
    connection = null;
  }

  /**
   * A connection for the liveness session: autocommit, each answer awaited at most the bound. Not
   * less: a driver that times out a request closes its connection, which ends the session and with
   * it every lease granted with it, where a late answer within the bound loses none (a confirmation
   * late past the bound has let the leases run out anyway).
   */
  private Connection open() throws SQLException {
    Connection c = dataSource.getConnection();
    try {
      c.setAutoCommit(true);
      c.setNetworkTimeout(Runnable::run, (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(boundNanos)));
      return c;
    } catch (SQLException | RuntimeException e) {
      closeQuietly(c);
      throw e;
    }
  }

  private static void closeQuietly(Connection c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (SQLException | RuntimeException ignored) {
      // broken: the pool discards it
    }
  }

  /**
   * Ends the confirmations and gives the connection back; every lease granted with this store's
   * session is then lost to its holder.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      closed = true;
      t = thread;
    }
    synchronized (firstConfirmation) {
      firstConfirmation.notifyAll();
    }
    if (t != null) {
      LockSupport.unpark(t);
    }
  }
}
