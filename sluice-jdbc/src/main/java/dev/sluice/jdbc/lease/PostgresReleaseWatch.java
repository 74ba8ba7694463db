package dev.sluice.jdbc.lease;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Release notices of the SQL lease store on PostgreSQL ({@code LeaseStore#watchReleases}): the
 * store's releases and deletions notify a channel of the table in the same statement
 * ({@code pg_notify}, delivered when it commits); this watch {@code LISTEN}s on one connection of
 * the pool, held while it runs, and passes on the names under one prefix, from a daemon thread. A
 * hint only: it reopens after errors with back-off, and releases while it is reopening are not
 * heard (peers take them at their next attempt). Only with the PostgreSQL JDBC driver (pgjdbc),
 * which receives notifications; {@link SqlLeaseStore} loads this class only then. Where the
 * database was not known when the watch started (unreachable then), its first connection tells:
 * on any other database the watch ends quietly.
 */
final class PostgresReleaseWatch implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PostgresReleaseWatch.class);
  /** How long one wait for notifications blocks; with the UNLISTEN bound, how long the thread outlives {@link #close}. */
  private static final int WAIT_MILLIS = 500;
  /** How long the {@code UNLISTEN} before giving the connection back may wait for its answer. */
  private static final int UNLISTEN_TIMEOUT_MILLIS = 1000;

  private final DataSource dataSource;
  private final String channel;
  private final String prefix;
  private final Consumer<String> released;
  private final Thread thread;
  private volatile boolean closed;
  /** The connection {@link #start()} opened and listens on, handed to the thread. */
  private volatile Connection first;

  PostgresReleaseWatch(DataSource dataSource, String channel, String prefix, Consumer<String> released) {
    this.dataSource = dataSource;
    this.channel = channel;
    this.prefix = prefix;
    this.released = released;
    this.thread = new Thread(this::run, "sluice-release-watch-" + prefix);
    this.thread.setDaemon(true);
  }

  /**
   * Listens before returning, so that every release committed after this call is heard (a
   * connection opened later by the thread would miss those in between), then reads on the thread.
   * Returns null where notifications cannot be received (not PostgreSQL, not pgjdbc). If the
   * database cannot be reached now, the thread keeps trying.
   */
  PostgresReleaseWatch start() {
    try {
      first = listen();
    } catch (NoNotifications e) {
      log.info("No release notices for {}: {}; peers take released partitions at their next attempt", prefix,
          e.getMessage());
      return null;
    } catch (SQLException | RuntimeException e) {
      log.debug("Release notices for {} not open yet ({}); the watch thread retries", prefix, e.toString());
    }
    thread.start();
    return this;
  }

  private static final class NoNotifications extends Exception {
    private static final long serialVersionUID = 1L;

    NoNotifications(String message) {
      super(message);
    }
  }

  private Connection listen() throws SQLException, NoNotifications {
    Connection c = dataSource.getConnection();
    try {
      String product = c.getMetaData().getDatabaseProductName();
      if (product == null || !product.toLowerCase(java.util.Locale.ROOT).contains("postgres")) {
        throw new NoNotifications("the database (" + product + ") has no notifications");
      }
      if (!c.isWrapperFor(PGConnection.class)) {
        throw new NoNotifications("the connection (" + c.getClass().getName() + ") is not the PostgreSQL JDBC driver's");
      }
      c.setAutoCommit(true); // LISTEN takes effect when its transaction commits
      try (Statement s = c.createStatement()) {
        s.execute("LISTEN " + quoted(channel));
      }
      return c;
    } catch (SQLException | NoNotifications | RuntimeException e) {
      closeQuietly(c);
      throw e;
    }
  }

  static String quoted(String identifier) {
    return '"' + identifier.replace("\"", "\"\"") + '"';
  }

  private void run() {
    long backoffMillis = 500;
    while (!closed) {
      Connection c = first;
      first = null;
      try {
        if (c == null) {
          c = listen();
        }
        backoffMillis = 500;
        PGConnection pg = c.unwrap(PGConnection.class);
        while (!closed) {
          PGNotification[] notices = pg.getNotifications(WAIT_MILLIS);
          if (notices == null) {
            continue;
          }
          for (PGNotification n : notices) {
            if (channel.equals(n.getName()) && n.getParameter() != null && n.getParameter().startsWith(prefix)) {
              notice(n.getParameter());
            }
          }
        }
      } catch (NoNotifications e) {
        log.info("No release notices for {}: {}; peers take released partitions at their next attempt", prefix,
            e.getMessage());
        closed = true;
      } catch (SQLException | RuntimeException e) {
        if (!closed) {
          log.debug("Release notices for {} interrupted ({}); listening again in {} ms", prefix, e.toString(),
              backoffMillis);
          unlistenAndClose(c);
          c = null;
          LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(backoffMillis));
          backoffMillis = Math.min(backoffMillis * 2, 30_000);
        }
      } finally {
        if (closed) {
          unlistenAndClose(c);
        }
      }
    }
    unlistenAndClose(first); // opened by start() but closed before this thread took it
    first = null;
  }

  private void notice(String name) {
    try {
      released.accept(name);
    } catch (RuntimeException e) {
      log.warn("Release notice for {} failed in its consumer", name, e);
    }
  }

  /**
   * Back to the pool without the subscription, so the next borrower is not notified. The
   * {@code UNLISTEN} waits at most {@link #UNLISTEN_TIMEOUT_MILLIS} for its answer: on a connection
   * nobody answers (a partition, a half-open socket) it would otherwise wait without bound, holding
   * this thread and the connection after {@link #close}. pgjdbc closes a connection whose request
   * timed out, and the pool then discards it; a healthy one goes back with its own timeout.
   */
  private static void unlistenAndClose(Connection c) {
    if (c == null) {
      return;
    }
    try {
      int previous = c.getNetworkTimeout();
      c.setNetworkTimeout(Runnable::run, UNLISTEN_TIMEOUT_MILLIS);
      try (Statement s = c.createStatement()) {
        s.execute("UNLISTEN *");
      }
      c.setNetworkTimeout(Runnable::run, previous);
    } catch (SQLException | RuntimeException e) {
      // A broken connection: the pool discards it.
    }
    closeQuietly(c);
  }

  private static void closeQuietly(Connection c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (SQLException ignored) {
      // nothing left to do
    }
  }

  /**
   * Stops the watch without waiting for it: the thread ends after its current wait (at most half
   * a second) and its {@code UNLISTEN} (at most a second more, on a connection nobody answers), and
   * gives its connection back to the pool. Not waiting matters: a closing listener
   * closes its watch before it releases its partitions, and peers wait for those releases.
   */
  @Override
  public void close() {
    closed = true;
  }
}
