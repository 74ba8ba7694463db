package dev.sluice.testkit.lease;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.process.ChildJvm;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A lease fuzz tester for any {@link LeaseStore}, run in several JVMs at once: each JVM runs
 * threads that contend for one lease name for a while and append every interval during which
 * the store guaranteed them the lease to a ledger file. Holders release, delete or abandon the
 * lease; threads that lose and holders that lost it delete the record if idle, so epochs are also
 * checked across deletions, and deleteIfIdle against held leases. {@link #verify} then checks the merged
 * ledgers: epochs unique and strictly increasing in time, and no two intervals overlap.
 *
 * <p>Usage (one process per JVM, typically through {@code ChildJvm}):
 *
 * <pre>
 * LeaseFuzz &lt;factory class&gt; &lt;ledger file&gt; &lt;jvm id&gt; &lt;threads&gt; &lt;run ms&gt;
 *           &lt;lease name&gt; &lt;lease ms&gt; [factory args...]
 * </pre>
 *
 * <p>The factory class implements {@link StoreFactory} and has a public no-argument constructor.
 *
 * <p>Intervals use only the store's clock. {@code heldFrom} is the later of the grant's own time
 * on that clock (its expiry minus the lease duration) and the store's time read after the
 * acquisition returned: the stamp alone can precede the moment the store found the lease free (a
 * SQL server stamps with the time the statement arrived, then may wait for a row lock behind a
 * release), and the read alone can lag (a store may answer {@code now()} from an estimate that
 * lags its clock by a reply's travel time). {@code heldTo} is
 * what the store last promised: the expiry of the last successful acquisition or renewal, or,
 * for a holder that releases early, the store's time read before the release. A holder that
 * paused past its lease and then fails to renew records only up to the last promise. A correct
 * store grants the lease to someone else only after that promise ended, so any overlap is a real
 * violation of "one owner at a time" (a store that steals live leases is caught).
 */
public final class LeaseFuzz {

  /** Creates the store under test in the fuzzing JVM. */
  public interface StoreFactory {
    LeaseStore create(List<String> args) throws Exception;
  }

  /** One ledger line: {@code owner} held the lease with {@code epoch} from..to (store clock). */
  public record Entry(String owner, long epoch, Instant heldFrom, Instant heldTo) {
    static Entry parse(String line) {
      String[] f = line.split(",");
      if (f.length != 4) {
        throw new IllegalArgumentException("bad ledger line: " + line);
      }
      return new Entry(
          f[0],
          Long.parseLong(f[1]),
          Instant.ofEpochMilli(Long.parseLong(f[2])),
          Instant.ofEpochMilli(Long.parseLong(f[3])));
    }

    String format() {
      return owner + "," + epoch + "," + heldFrom.toEpochMilli() + "," + heldTo.toEpochMilli();
    }
  }

  /** What {@link #verify} found. */
  public record Summary(int intervals, int owners, long firstEpoch, long lastEpoch) {}

  private LeaseFuzz() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 7) {
      System.err.println(
          "usage: LeaseFuzz <factory class> <ledger file> <jvm id> <threads> <run ms>"
              + " <lease name> <lease ms> [factory args...]");
      System.exit(2);
    }
    StoreFactory factory =
        (StoreFactory) Class.forName(args[0]).getDeclaredConstructor().newInstance();
    Path ledger = Path.of(args[1]);
    String jvm = args[2];
    int threads = Integer.parseInt(args[3]);
    long runMillis = Long.parseLong(args[4]);
    String name = args[5];
    Duration lease = Duration.ofMillis(Long.parseLong(args[6]));
    List<String> factoryArgs = Arrays.asList(args).subList(7, args.length);

    LeaseStore store = factory.create(factoryArgs);
    AtomicInteger held = new AtomicInteger();
    AtomicInteger lost = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    try (BufferedWriter out = Files.newBufferedWriter(ledger, StandardCharsets.UTF_8)) {
      System.out.println("READY " + jvm);
      long deadline = System.nanoTime() + Duration.ofMillis(runMillis).toNanos();
      List<Thread> workers = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        String owner = jvm + "-t" + t;
        Thread w =
            new Thread(
                () -> {
                  try {
                    contend(store, name, owner, lease, deadline, out, held, lost);
                  } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                  }
                },
                owner);
        workers.add(w);
        w.start();
      }
      for (Thread w : workers) {
        w.join();
      }
    }
    if (failure.get() != null) {
      System.out.println("FAILED " + failure.get());
      failure.get().printStackTrace(System.out);
      System.exit(1);
    }
    System.out.println("DONE " + jvm + " held=" + held.get() + " lost=" + lost.get());
    System.exit(0);
  }

  private static void contend(
      LeaseStore store,
      String name,
      String owner,
      Duration lease,
      long deadline,
      BufferedWriter out,
      AtomicInteger held,
      AtomicInteger lost)
      throws Exception {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    long leaseMillis = lease.toMillis();
    while (System.nanoTime() < deadline) {
      Optional<Lease> acquired;
      try {
        acquired = store.tryAcquire(name, owner, lease);
      } catch (LeaseStoreException e) {
        if (!e.retryable()) {
          throw e;
        }
        // No answer in time (a loaded machine): whether it was granted is unknown, so nothing is
        // recorded; an unrecorded grant only delays the others, it cannot make an overlap appear.
        Thread.sleep(random.nextLong(1, Math.max(2, leaseMillis / 10)));
        continue;
      }
      if (acquired.isEmpty()) {
        if (random.nextInt(4) == 0) {
          // A janitor: deletes the record it just read if idle. Must never hit a held lease
          // (the next grant would overlap) nor one re-acquired since the read.
          unlessNoAnswer(() -> store.read(name).ifPresent(r -> store.deleteIfIdle(name, r.epoch())));
        }
        Thread.sleep(random.nextLong(1, Math.max(2, leaseMillis / 10)));
        continue;
      }
      Lease current = acquired.get();
      // When the holder can count on the lease, on the store's clock: the later of the grant's
      // own stamp (expiry minus duration) and the store's time read after the grant returned.
      // Neither alone is always inside the holding: a SQL server stamps the grant with the time
      // its statement arrived (now() is the transaction's start), which can precede the moment
      // it found the row free (a lock wait behind a release, a backend descheduled under load);
      // a store whose now() is an estimate may answer a time that lags its clock by a reply's
      // travel time. The later of the two is after the grant and still inside the holding.
      Instant heldFrom = current.expiresAt().minus(lease);
      boolean recorded = true;
      try {
        Instant after = store.now();
        if (after.isAfter(heldFrom)) {
          heldFrom = after;
        }
      } catch (LeaseStoreException e) {
        if (!e.retryable()) {
          throw e;
        }
        // No answer in time: when this holding began is not known closely enough to check it.
        recorded = false;
      }
      // What the store promised: the lease is ours until this instant unless we release it.
      Instant promisedUntil = current.expiresAt();
      int renewals = 1 + random.nextInt(3);
      boolean pauseBeyondLease = random.nextInt(10) == 0;
      boolean stillHeld = true;
      try {
        for (int r = 0; r < renewals; r++) {
          // Simulated work; sometimes longer than the lease, as a GC pause would be.
          Thread.sleep(
              pauseBeyondLease && r == renewals - 1
                  ? leaseMillis + random.nextLong(1, leaseMillis)
                  : random.nextLong(0, Math.max(1, leaseMillis / 4)));
          current = store.renew(current, lease);
          promisedUntil = current.expiresAt();
        }
      } catch (LeaseLostException e) {
        // Lost after a pause: the store's last promise still stands, nothing after it.
        lost.incrementAndGet();
        stillHeld = false;
      } catch (LeaseStoreException e) {
        if (!e.retryable()) {
          throw e;
        }
        // A renewal that got no answer in time: as the lease keeper does, the holder counts on
        // nothing past the store's last promise, and stops there.
        lost.incrementAndGet();
        stillHeld = false;
      }
      Instant heldTo = promisedUntil;
      int ending = random.nextInt(6);
      if (stillHeld && ending < 3) {
        // Give it up early: held until a store time read before the release or deletion.
        Instant now = store.now();
        heldTo = now.isBefore(promisedUntil) ? now : promisedUntil;
        try {
          if (ending == 2) {
            // Deleting the record (as a membership record is at shutdown): epochs granted after
            // the deletion must still be above this one.
            store.delete(current);
          } else {
            store.release(current);
            if (ending == 1) {
              store.deleteIfIdle(name, current.epoch());
            }
          }
        } catch (LeaseStoreException e) {
          if (!e.retryable()) {
            throw e;
          }
          // Not released: the lease runs out at the store's last promise, after heldTo.
        }
      } else if (!stillHeld && ending == 0) {
        // Clean-up of the record this thread lost, if nobody took it since.
        long epoch = current.epoch();
        unlessNoAnswer(() -> store.deleteIfIdle(name, epoch));
      }
      if (recorded && !heldTo.isBefore(heldFrom)) {
        synchronized (out) {
          out.write(new Entry(owner, current.epoch(), heldFrom, heldTo).format());
          out.newLine();
        }
        held.incrementAndGet();
      }
    }
  }

  /** Runs a clean-up call; one the store did not answer in time is skipped (it changes no ledger line). */
  private static void unlessNoAnswer(Runnable call) {
    try {
      call.run();
    } catch (LeaseStoreException e) {
      if (!e.retryable()) {
        throw e;
      }
    }
  }

  /**
   * Runs the fuzz in {@code jvms} child JVMs (this JVM's class path) and verifies the merged
   * ledger. The children are killed if they outlive {@code run} by a minute.
   *
   * @param factory the store factory class, instantiated in each child
   * @param factoryArgs its arguments (for example a connection string)
   * @param dir where the ledgers and, on failure, the children's output are written
   * @return the verified summary
   * @throws AssertionError if a child fails or the ledger shows a violation
   */
  public static Summary runInChildJvms(
      Class<? extends StoreFactory> factory,
      List<String> factoryArgs,
      Path dir,
      int jvms,
      int threadsPerJvm,
      Duration run,
      String leaseName,
      Duration lease) {
    List<ChildJvm> children = new ArrayList<>();
    List<Path> ledgers = new ArrayList<>();
    try {
      for (int j = 0; j < jvms; j++) {
        String id = "jvm" + (char) ('A' + j);
        Path ledger = dir.resolve(id + ".ledger");
        ledgers.add(ledger);
        List<String> args = new ArrayList<>(List.of(
            factory.getName(), ledger.toString(), id, Integer.toString(threadsPerJvm),
            Long.toString(run.toMillis()), leaseName, Long.toString(lease.toMillis())));
        args.addAll(factoryArgs);
        children.add(ChildJvm.start(id, LeaseFuzz.class, args.toArray(String[]::new)));
      }
      for (ChildJvm child : children) {
        int exit = child.awaitExit(run.plusMinutes(1));
        if (exit != 0) {
          child.dumpOutput(dir.resolve(child.name() + ".out"));
          throw new AssertionError(
              "fuzz JVM " + child.name() + " exited with " + exit + ": " + child.output());
        }
      }
      Summary summary = verify(read(ledgers));
      for (int j = 0; j < jvms; j++) {
        String id = "jvm" + (char) ('A' + j);
        if (read(List.of(ledgers.get(j))).isEmpty()) {
          throw new AssertionError("fuzz JVM " + id + " never held the lease: no contention");
        }
      }
      return summary;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } finally {
      children.forEach(ChildJvm::close);
    }
  }

  /** Reads ledgers written by {@link #main}. */
  public static List<Entry> read(List<Path> ledgers) {
    List<Entry> all = new ArrayList<>();
    for (Path p : ledgers) {
      try {
        for (String line : Files.readAllLines(p, StandardCharsets.UTF_8)) {
          if (!line.isBlank()) {
            all.add(Entry.parse(line));
          }
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read ledger " + p, e);
      }
    }
    return all;
  }

  /**
   * Checks the merged ledger: every epoch granted once, and ordered by epoch, each interval ends
   * no later than the next one begins (store clock, millisecond precision), unless both belong
   * to the same owner, whose re-acquisition legitimately replaces its own earlier grant.
   *
   * @throws AssertionError naming the first violation
   */
  public static Summary verify(List<Entry> entries) {
    if (entries.isEmpty()) {
      throw new AssertionError("empty ledger: nobody ever held the lease");
    }
    List<Entry> byEpoch = new ArrayList<>(entries);
    byEpoch.sort(Comparator.comparingLong(Entry::epoch));
    for (int i = 1; i < byEpoch.size(); i++) {
      Entry prev = byEpoch.get(i - 1);
      Entry next = byEpoch.get(i);
      if (prev.epoch() == next.epoch()) {
        throw new AssertionError("epoch " + next.epoch() + " granted twice: " + prev + " and " + next);
      }
      // The same owner re-acquiring ends its own previous incarnation (the new epoch fences
      // it); the store only promises exclusion between different owners.
      if (next.heldFrom().isBefore(prev.heldTo()) && !next.owner().equals(prev.owner())) {
        throw new AssertionError(
            "overlap: " + prev + " still held the lease when " + next + " got it (or epochs"
                + " do not increase in time)");
      }
    }
    long owners = entries.stream().map(Entry::owner).distinct().count();
    return new Summary(
        entries.size(),
        (int) owners,
        byEpoch.get(0).epoch(),
        byEpoch.get(byEpoch.size() - 1).epoch());
  }
}
