package dev.sluice.listener;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Reference {@link ChangeFeed} over an in-memory log, for the engine's unit tests only. Position
 * tokens are log offsets; {@link #trimBefore} drops history so resuming fails as on a real
 * source; {@link #end} appends an end-of-stream marker (like MongoDB's invalidate).
 */
public final class InMemoryFeed implements ChangeFeed<String> {
  private final String stream;
  private final List<ChangeEvent<String>> log = new ArrayList<>();
  private int trimmed;
  private int endAt = -1;
  private volatile int failNextPolls;
  private volatile int crashNextPolls;
  private volatile int errorNextPolls;
  private volatile int failNextOpens;
  private volatile CountDownLatch blockNextPoll;
  private volatile boolean pollBlocked;

  public InMemoryFeed(String stream) {
    this.stream = stream;
  }

  /** Appends "v<from>" .. "v<to - 1>", keyed "k<i % 7>": the tests' usual stream of changes. */
  void appendValues(int from, int to) {
    for (int i = from; i < to; i++) {
      append("k" + (i % 7), "v" + i);
    }
  }

  /** The values {@link #appendValues} appends, in order. */
  static java.util.List<String> values(int from, int to) {
    java.util.List<String> out = new java.util.ArrayList<>();
    for (int i = from; i < to; i++) {
      out.add("v" + i);
    }
    return out;
  }

  public synchronized void append(String key, String value) {
    int offset = log.size();
    Position p = new Position(Integer.toString(offset + 1), Instant.ofEpochSecond(1_700_000_000L + offset));
    log.add(new ChangeEvent<>("ev-" + offset, stream, p, Operation.INSERT, key, key, value, p.time(), null));
    notifyAll();
  }

  /** Appends a change the feed cannot decode (it still has a position). */
  synchronized void appendUndecodable(String key, String reason) {
    int offset = log.size();
    Position p = new Position(Integer.toString(offset + 1), Instant.ofEpochSecond(1_700_000_000L + offset));
    log.add(new ChangeEvent<>("ev-" + offset, stream, p, Operation.OTHER, key, key, null, p.time(),
        new dev.sluice.feed.UndecodableChange(reason, "raw bytes")));
    notifyAll();
  }

  synchronized int size() {
    return log.size();
  }

  public synchronized void trimBefore(int offset) {
    trimmed = offset;
  }

  public synchronized void end() {
    endAt = log.size();
  }

  public void failNextPolls(int n) {
    failNextPolls = n;
  }

  /** The next {@code n} polls throw an untyped exception, as a driver bug would. */
  void crashNextPolls(int n) {
    crashNextPolls = n;
  }

  /** The next {@code n} polls throw an {@link Error}, as a linkage error or a stack overflow would. */
  void errorNextPolls(int n) {
    errorNextPolls = n;
  }

  /**
   * The next {@code n} opens at the latest position fail with a transient error (server
   * unreachable), as after lost history when the listener skips to latest.
   */
  void failNextLatestOpens(int n) {
    failNextOpens = n;
  }

  /**
   * The next poll blocks until {@code release} is counted down, whatever its maxWait, as a
   * getMore on a slow or unreachable server does.
   */
  void blockNextPoll(CountDownLatch release) {
    blockNextPoll = release;
  }

  /** Whether a poll is blocked by {@link #blockNextPoll} right now. */
  boolean pollBlocked() {
    return pollBlocked;
  }

  @Override
  public String stream() {
    return stream;
  }

  @Override
  public synchronized FeedCursor<String> open(PartitionSpec partition, StartPoint start) {
    if (start instanceof StartPoint.Latest && failNextOpens > 0) {
      failNextOpens--;
      throw new FeedException("injected: server unreachable while opening", null, true);
    }
    int from;
    if (start instanceof StartPoint.After after) {
      from = Integer.parseInt(after.position().token());
      if (from < trimmed) {
        throw new HistoryLostException(after.position(), Instant.ofEpochSecond(1_700_000_000L + trimmed),
            "in-memory log trimmed before offset " + trimmed, null);
      }
    } else if (start instanceof StartPoint.Oldest) {
      from = trimmed;
    } else if (start instanceof StartPoint.Latest) {
      from = log.size();
    } else {
      throw new IllegalArgumentException("unsupported " + start);
    }
    return new Cursor(partition, from);
  }

  private final class Cursor implements FeedCursor<String> {
    private final PartitionSpec partition;
    private int next;
    private boolean ended;

    Cursor(PartitionSpec partition, int from) {
      this.partition = partition;
      this.next = from;
    }

    @Override
    public List<ChangeEvent<String>> poll(Duration maxWait) {
      CountDownLatch block = blockNextPoll;
      if (block != null) {
        blockNextPoll = null;
        pollBlocked = true;
        try {
          block.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        return List.of();
      }
      if (errorNextPolls > 0) {
        errorNextPolls--;
        throw new StackOverflowError("injected error in the feed");
      }
      if (crashNextPolls > 0) {
        crashNextPolls--;
        throw new IllegalStateException("injected driver bug");
      }
      if (failNextPolls > 0) {
        failNextPolls--;
        throw new FeedException("injected feed failure", null, true);
      }
      synchronized (InMemoryFeed.this) {
        if (next < trimmed) {
          throw new HistoryLostException(Position.of(Integer.toString(next)), null, "trimmed", null);
        }
        if (next >= log.size() && endAt < 0) {
          try {
            TimeUnit.NANOSECONDS.timedWait(InMemoryFeed.this, maxWait.toNanos());
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
        List<ChangeEvent<String>> out = new ArrayList<>();
        int limit = endAt >= 0 ? endAt : log.size();
        while (next < limit && out.size() < 50) {
          ChangeEvent<String> e = log.get(next++);
          if (partition.owns(e.key())) {
            out.add(e);
          }
        }
        if (endAt >= 0 && next >= endAt) {
          ended = true;
        }
        return out;
      }
    }

    @Override
    public Position position() {
      return Position.of(Integer.toString(next));
    }

    @Override
    public boolean ended() {
      return ended;
    }

    @Override
    public void close() {}
  }
}
