package dev.sluice.listener.internal;

import dev.sluice.SluiceException;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The listener: one {@link PartitionWorker} per partition, each competing for its lease, running
 * in turns on a pool of at most {@link ListenerConfig#threads()} threads (ADR 0075) with one timer
 * thread for the waits between turns; one scheduler thread for the membership, the assignment and
 * release notices; a small pool that renews the held partition leases (one thread per {@value
 * #LEASES_PER_RENEWAL_THREAD} partitions, at most {@value #MAX_RENEWAL_THREADS}); and one thread
 * that asks the source for its history every few seconds ({@link SourceProbe}). With a concurrency
 * above 1, one pool of lanes for every partition: at most threads × concurrency.
 */
public final class ListenerEngine<D> implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ListenerEngine.class);

  private final ListenerConfig<D> config;
  private final LifecycleLog lifecycle;
  private final List<PartitionWorker<D>> workers = new ArrayList<>();
  /** Runs the partitions' turns. */
  private ThreadPoolExecutor turns;
  /** Times the waits between turns; its tasks only submit a turn. */
  private ScheduledExecutorService timers;
  /** The lanes of a concurrency above 1, shared by the partitions; else null. */
  private ThreadPoolExecutor lanes;
  private ScheduledExecutorService renewals;
  /**
   * Renews the partitions' leases. A renewal is one round trip that holds its thread, so the pool
   * renews threads / round trip leases a second, and every held lease needs one per renewal
   * interval: 32 threads keep 1,000 leases of 10 s against a store 250 ms away, where 8 failed at
   * 80 ms (ADR 0132, RenewalCapacityBenchmark). At most 32, so that with the partition threads
   * they stay within the MongoDB driver's default pool of 100 connections.
   */
  private ScheduledExecutorService keepers;
  static final int LEASES_PER_RENEWAL_THREAD = 32;
  static final int MAX_RENEWAL_THREADS = 32;
  /** Asks the source for its history (lag, history window); a thread of its own, never renewals'. */
  private ScheduledExecutorService probes;
  private Assignment assignment;
  private AutoCloseable releaseWatch = () -> { };
  private boolean started;
  private boolean closed;

  public ListenerEngine(ListenerConfig<D> config) {
    this.config = config;
    this.lifecycle = new LifecycleLog(config);
  }

  /** Starts competing for the partitions; a second call does nothing. */
  public synchronized void start() {
    if (closed) {
      throw new SluiceException("Listener " + config.owner() + " was closed; build a new one");
    }
    if (started) {
      return;
    }
    refuseAConflictingLayout();
    started = true;
    renewals = Executors.newSingleThreadScheduledExecutor(numbered("sluice-renew-" + config.feed().stream() + "-"));
    assignment = new Assignment(config, renewals, dev.sluice.Ticker.system());
    assignment.refresh();
    renewals.scheduleWithFixedDelay(assignment::refresh, config.renewInterval().toNanos(),
        config.renewInterval().toNanos(), TimeUnit.NANOSECONDS);
    SourceProbe probe = new SourceProbe(config.feed());
    probes = Executors.newSingleThreadScheduledExecutor(daemons(() -> "sluice-source-" + config.feed().stream()));
    probes.scheduleWithFixedDelay(probe::refresh, 0, SourceProbe.INTERVAL.toNanos(), TimeUnit.NANOSECONDS);
    int keeperThreads = Math.min(MAX_RENEWAL_THREADS,
        (config.partitions() + LEASES_PER_RENEWAL_THREAD - 1) / LEASES_PER_RENEWAL_THREAD);
    keepers = Executors.newScheduledThreadPool(keeperThreads, numbered("sluice-keep-" + config.feed().stream() + "-"));
    String prefix = "sluice-" + config.group() + "-" + config.feed().stream() + "-";
    turns = pool(config.threads(), prefix);
    if (config.concurrency() > 1) {
      lanes = pool(config.threads() * config.concurrency(), prefix + "lane-");
    }
    ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, daemons(() -> prefix + "timer"));
    timer.setRemoveOnCancelPolicy(true); // most waits end early (a wake): their timers go at once
    timers = timer;
    LayoutCheck layout = new LayoutCheck(config);
    for (int i = 0; i < config.partitions(); i++) {
      workers.add(new PartitionWorker<>(config, i, keepers, assignment, probe, lifecycle, layout, lanes));
    }
    // After a refresh that leaves room under the quota (a member left, or its membership expired):
    // the workers refused for want of it try at once, not at the end of their acquire interval, and
    // so does any idle worker whose partition was released since the last refresh (without a release
    // notice it would wait for its former holder's expiry, and a peer could adopt it first).
    assignment.onRoom(room -> workers.stream()
        .filter(w -> w.waitingForRoom() ? room.worthTrying().test(w.partition.index())
            : !w.holdsLease() && room.unheld().test(w.partition.index()))
        .forEach(PartitionWorker::tryNow));
    lifecycle.started();
    workers.forEach(w -> w.start(turns, timers));
    watchReleases();
  }

  /** A pool of at most {@code size} daemon threads, which end after a minute idle. */
  private static ThreadPoolExecutor pool(int size, String prefix) {
    ThreadPoolExecutor pool = new ThreadPoolExecutor(size, size, 1, TimeUnit.MINUTES,
        new LinkedBlockingQueue<>(), numbered(prefix));
    pool.allowCoreThreadTimeOut(true);
    return pool;
  }

  /** Daemon threads, each named by {@code name}. */
  private static ThreadFactory daemons(Supplier<String> name) {
    return r -> {
      Thread t = new Thread(r, name.get());
      t.setDaemon(true);
      return t;
    };
  }

  /** Daemon threads named {@code prefix} 1, 2, ... */
  private static ThreadFactory numbered(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return daemons(() -> prefix + n.incrementAndGet());
  }

  /**
   * A partition released or deleted by another member (a peer that stopped, or handed it back)
   * is tried at once, and so is every partition when a member leaves: the assignment is
   * refreshed, then the workers woken from their pause between attempts. Only a hint
   * (LeaseStore#watchReleases); the attempts on the workers' own schedule stay.
   */
  private void watchReleases() {
    String partitions = config.partitionPrefix();
    String members = config.memberPrefix();
    String stream = config.group() + "/" + config.feed().stream();
    try {
      releaseWatch = config.leaseStore().watchReleases(stream, name -> {
        // A partition of this layout: its worker; a member that left: every idle worker; anything
        // else under the prefix (another stream whose name starts with this one's): nobody.
        List<PartitionWorker<D>> told = workers.stream()
            .filter(w -> !w.holdsLease()
                && (name.startsWith(partitions) ? w.leaseName().equals(name) : name.startsWith(members)))
            .toList();
        if (told.isEmpty()) {
          return;
        }
        try {
          renewals.execute(() -> {
            assignment.refresh();
            told.forEach(PartitionWorker::tryNow);
          });
        } catch (RejectedExecutionException closing) {
          // closed meanwhile
        }
      });
    } catch (RuntimeException e) {
      log.info("Listener {}: no release notices from the lease store ({}); peers' partitions are taken at the next attempt",
          config.owner(), e.toString());
    }
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      releaseWatch.close();
    } catch (Exception e) {
      log.debug("closing the release watch: {}", e.toString());
    }
    workers.forEach(PartitionWorker::stop);
    workers.forEach(PartitionWorker::wake);
    // Leave the group first, so peers count this member out while its partitions are released:
    // with release notices they take them over at once.
    if (assignment != null) {
      assignment.leave();
    }
    // Hand every lease over now: waits for a handler call in progress, never for a read of the
    // feed in flight (that thread leaves when its read returns and touches the lease no more).
    workers.forEach(PartitionWorker::stopAndHandOver);
    long waitMillis = config.leaseDuration().toMillis() * 2;
    long start = System.nanoTime();
    for (PartitionWorker<D> w : workers) {
      // One deadline for all: a partition that holds its lease may take a handler call to stop.
      long budget = w.holdsLease() ? waitMillis : 1_000;
      long left = budget - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      try {
        if (!w.awaitFinished(Math.max(0, left)) && w.holdsLease()) {
          log.warn("Partition {} did not stop within {} ms (handler still running); its lease will expire",
              w.leaseName(), waitMillis);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    // No interrupts: a handler still running finishes on its own; its partition runs no more turns.
    if (turns != null) {
      turns.shutdown();
    }
    if (lanes != null) {
      lanes.shutdown();
    }
    if (timers != null) {
      timers.shutdownNow();
    }
    if (probes != null) {
      probes.shutdownNow();
    }
    if (keepers != null) {
      keepers.shutdownNow();
    }
    if (renewals != null) {
      renewals.shutdownNow();
      try {
        renewals.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    lifecycle.stopped();
  }

  /**
   * Fails start() when the group already has partition records for another partition count, so
   * the mistake shows at once; the workers check again after every acquisition (the store may be
   * unreachable now, or another member may start at the same moment).
   */
  private void refuseAConflictingLayout() {
    List<dev.sluice.lease.LeaseRecord> records;
    try {
      records = config.leaseStore().list(config.partitionPrefix());
    } catch (RuntimeException e) {
      log.warn("Cannot list the records of group '{}' at start (checked again on acquisition): {}",
          config.group(), e.toString());
      return;
    }
    String conflict = LayoutCheck.conflict(config, records);
    if (conflict != null) {
      throw new dev.sluice.ConfigurationException(conflict);
    }
  }

  public String owner() {
    return config.owner();
  }

  public synchronized List<PartitionStatus> status() {
    return workers.stream().map(PartitionWorker::status).toList();
  }

  public ListenerConfig<D> config() {
    return config;
  }
}
