package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.Position;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.UUID;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.postgresql.PGConnection;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The replication stream of one partition's slot and its connection: opening it, taking the slot
 * over from a session whose lease is gone (ADR 0065); the keep-alive while nobody reads; the
 * acknowledgements, the only way the slot's confirmed position moves (ADR 0063); noticing a
 * connection gone silent (ADR 0106); and closing without waiting long on a server that does not
 * answer. The cursor reads it while holding its {@link #lock}; the keep-alive never waits for it.
 */
final class PgSlotStream {
  private static final Logger log = LoggerFactory.getLogger(PgFeedCursor.class); // the cursor's log, as before the split
  /** How long a listener's cursor waits for the session it ended to let go of the slot. */
  private static final long TAKE_OVER_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final PostgresChangeFeedImpl feed;
  private final String slot;
  private final PgSlot slots;
  private Connection connection;
  private PGReplicationStream stream;
  /** Held while the stream is used: by reads, acknowledge and close, and by the keep-alive. */
  private final ReentrantLock streamLock = new ReentrantLock();
  /** When the server was last told our status and asked for a reply (System.nanoTime). */
  private volatile long lastProbe = System.nanoTime();
  private ScheduledFuture<?> keepAlive;
  /** The replication connection's token for {@link ReplicationSockets}. */
  private String token;
  /** When bytes last arrived on the replication connection (System.nanoTime); null: not known. */
  private AtomicLong heard;
  /** Whether the replication connection was found silent: closed without ending the stream. */
  private boolean silent;

  PgSlotStream(PostgresChangeFeedImpl feed, String slot, PgSlot slots) {
    this.feed = feed;
    this.slot = slot;
    this.slots = slots;
  }

  /**
   * Starts streaming the slot from {@code lsn}. A listener's slot still held by another session
   * (a reader whose lease is gone) is taken over: that session is ended, and the start is tried
   * again until it lets go, for at most 10 s.
   */
  void open(long lsn) throws SQLException {
    long deadline = System.nanoTime() + TAKE_OVER_NANOS;
    boolean ended = false;
    while (true) {
      try {
        start(lsn);
        return;
      } catch (SQLException e) {
        closeStream();
        String message = e.getMessage() == null ? "" : e.getMessage();
        if (feed.group == null || !message.contains("is active for PID") || System.nanoTime() > deadline) {
          throw e;
        }
        if (!ended) {
          ended = slots.endHolder();
        }
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50)); // the ended session lets go of the slot
      }
    }
  }

  private void start(long lsn) throws SQLException {
    token = UUID.randomUUID().toString();
    heard = ReplicationSockets.register(token);
    silent = false;
    connection = feed.connections.connectForReplication(token);
    if (heard.get() == ReplicationSockets.NO_SOCKET) {
      // The URL named a socket factory of its own, which wins over the feed's: silence cannot be told.
      log.warn("PostgreSQL feed '{}': the replication URL sets its own socketFactory, so the feed cannot tell"
          + " when the server last sent anything: a cut-off replication connection of slot {} is noticed only"
          + " when the operating system gives it up (replicationTimeout does not apply)", feed.stream(), slot);
      heard = null;
    }
    var builder = connection.unwrap(PGConnection.class).getReplicationAPI()
        .replicationStream()
        .logical()
        .withSlotName(slot)
        .withStartPosition(LogSequenceNumber.valueOf(lsn))
        .withSlotOption("proto_version", "1")
        .withSlotOption("publication_names", feed.publication);
    if (feed.wantsMessages()) {
      // pgoutput sends logical-decoding messages only when asked (PostgreSQL 14 and later; an
      // older server refuses the option, naming it).
      builder = builder.withSlotOption("messages", "true");
    }
    stream = builder
        .withStatusInterval((int) feed.statusInterval.toMillis(), TimeUnit.MILLISECONDS)
        // pgjdbc would otherwise confirm the server's position on its own when idle, moving the
        // slot past the engine's checkpoint; the slot moves only through acknowledge (ADR 0063).
        .withAutomaticFlush(false)
        .start();
    lastProbe = System.nanoTime();
    keepAlive = feed.keepAlives.schedule(this::keepAlive, feed.statusInterval.toNanos());
  }

  /** Whether the stream was opened (and not closed since). */
  boolean isOpen() {
    return stream != null;
  }

  /** Taken while reading: the keep-alive and acknowledgements then wait, or skip a turn. */
  void lock() {
    streamLock.lock();
  }

  void unlock() {
    streamLock.unlock();
  }

  /** The next message the server sent, or null when everything it sent has been read. */
  ByteBuffer readPending() throws SQLException {
    return stream.readPending();
  }

  /** The WAL position of the server's last message (a keep-alive's included). */
  long lastReceiveLsn() {
    return stream.getLastReceiveLSN().asLong();
  }

  /**
   * Tells the server our status and asks it for a reply once the last ask is a status interval old
   * (pgjdbc's own periodic status asks for none): the server answers at once, so a live
   * connection is never silent much longer than a status interval.
   */
  void probeIfDue() throws SQLException {
    if (System.nanoTime() - lastProbe >= feed.statusInterval.toNanos()) {
      stream.forceUpdateStatus();
      lastProbe = System.nanoTime();
    }
  }

  /**
   * The failure of a replication connection from which nothing arrived for longer than the
   * replication timeout, or null: it is closed without the goodbye a half-open connection would
   * never answer, and the engine re-opens the partition at its last checkpoint.
   */
  FeedException silence() {
    if (heard == null) {
      return null;
    }
    long quietNanos = System.nanoTime() - heard.get();
    if (quietNanos <= feed.replicationTimeout.toNanos()) {
      return null;
    }
    silent = true;
    String reason = "PostgreSQL feed '" + feed.stream() + "': nothing arrived on the replication connection of"
        + " slot " + slot + " for " + TimeUnit.NANOSECONDS.toMillis(quietNanos) + " ms although the server was"
        + " asked for a reply every " + feed.statusInterval.toMillis() + " ms (replicationTimeout "
        + feed.replicationTimeout.toMillis() + " ms): the connection is cut off or half-open (a network"
        + " partition, a server that is gone, a walsender the server ended); closing it to read again from the"
        + " last checkpoint";
    log.warn(reason);
    return new FeedException(reason, null, true);
  }

  /**
   * Tells the server this reader is alive and what it confirmed while the engine does not read (a
   * slow handler, a long checkpoint): the server ends a replication connection that says nothing
   * for {@code wal_sender_timeout} (60 s by default). Runs on the feed's keep-alive thread; never
   * waits for a read in progress.
   */
  private void keepAlive() {
    if (System.nanoTime() - lastProbe < feed.statusInterval.toNanos() || !streamLock.tryLock()) {
      return;
    }
    try {
      if (stream != null && !stream.isClosed()) {
        stream.forceUpdateStatus();
        lastProbe = System.nanoTime();
      }
    } catch (SQLException e) {
      log.debug("PostgreSQL feed '{}': keep-alive of slot {} failed (the next read reports it): {}",
          feed.stream(), slot, e.toString());
    } finally {
      streamLock.unlock();
    }
  }

  /** Confirms the transaction boundary of {@code committed} to the slot: the server may recycle WAL before it. */
  void acknowledge(Position committed) {
    streamLock.lock();
    try {
      if (stream == null || stream.isClosed()) {
        return;
      }
      LogSequenceNumber lsn = LogSequenceNumber.valueOf(PgPosition.parse(committed).lsn());
      stream.setFlushedLSN(lsn);
      stream.setAppliedLSN(lsn);
      stream.forceUpdateStatus();
      lastProbe = System.nanoTime();
    } catch (SQLException e) {
      log.debug("PostgreSQL feed '{}': status update to slot {} failed (sent again with the next): {}",
          feed.stream(), slot, e.toString());
    } finally {
      streamLock.unlock();
    }
  }

  /** Ends the keep-alive, then the stream and its connection. */
  void close() {
    if (keepAlive != null) {
      feed.keepAlives.done(keepAlive);
      keepAlive = null;
    }
    streamLock.lock();
    try {
      closeStream();
    } finally {
      streamLock.unlock();
    }
  }

  /**
   * Ends the stream and closes its connection, never waiting long on a server that does not
   * answer: a connection found silent is closed at once; otherwise the end of the stream (which
   * waits for the server's reply) may wait at most 2 s (or the status interval, if shorter) for
   * each read (ADR 0106).
   */
  private void closeStream() {
    if (stream != null) {
      try {
        if (!silent && connection != null && !connection.isClosed()) {
          // pgjdbc reads a replication connection with the status interval as its socket timeout
          // (10 s by default): ending the stream waits no longer than 2 s for each read.
          connection.setNetworkTimeout(null, (int) Math.min(2_000, feed.statusInterval.toMillis()));
          stream.close();
        }
      } catch (SQLException e) {
        log.debug("closing the replication stream of {}: {}", slot, e.toString());
      }
      stream = null;
    }
    if (token != null) {
      ReplicationSockets.unregister(token);
      token = null;
    }
    if (connection != null) {
      try {
        connection.close();
      } catch (SQLException e) {
        log.debug("closing the replication connection of {}: {}", slot, e.toString());
      }
      connection = null;
    }
  }
}
