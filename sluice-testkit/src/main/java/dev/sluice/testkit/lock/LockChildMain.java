package dev.sluice.testkit.lock;

import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The process the multi-JVM lock tests start (see {@link LockFuzzAndCrash}). Arguments:
 * {@code mode backendClass backendArgument lockName leaseMillis extendMillis [mode arguments]}.
 *
 * <ul>
 *   <li>{@code fuzz ledger seconds threads}: threads contend for the lock; each holder appends
 *       {@code ENTER token} and {@code EXIT token} to the shared ledger file and makes a fenced
 *       write with its token; prints {@code DONE acquisitions rejected}.
 *   <li>{@code hold}: acquires, prints {@code ACQUIRED token}, then holds (extending) until killed.
 *   <li>{@code try-hold-as label}: with owner label {@code label} (set through the deprecated
 *       {@code ownerId}, as existing code does), one {@code tryAcquire}: prints {@code ACQUIRED
 *       token} and holds until killed, or prints {@code BUSY holder} and exits.
 *   <li>{@code pause resource goFile}: acquires, makes a fenced write, checks {@code isHeld()},
 *       prints {@code READY token}, then waits for {@code goFile} and makes its (late) fenced
 *       write: prints {@code LATE_WRITE applied|rejected}; the lost-lock callback prints
 *       {@code LOST}.
 * </ul>
 */
public final class LockChildMain {
  private LockChildMain() {}

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    LockTestBackend backend = ((LockTestBackend) Class.forName(args[1])
        .getDeclaredConstructor().newInstance()).open(args[2]);
    String name = args[3];
    Duration lease = Duration.ofMillis(Long.parseLong(args[4]));
    Duration extend = Duration.ofMillis(Long.parseLong(args[5]));
    CountDownLatch lost = new CountDownLatch(1);
    LockProvider.Builder builder = LockProvider.on(backend.leaseStore());
    if (mode.equals("try-hold-as")) {
      setOwnerLabel(builder, args[6]);
    }
    LockProvider locks = builder.leaseDuration(lease)
        .extendEvery(extend).backoff(Duration.ofMillis(5), Duration.ofMillis(50))
        .onLost((lock, cause) -> {
          System.out.println("LOST " + lock.token() + " " + cause.getMessage());
          lost.countDown();
        }).build();
    try {
      switch (mode) {
        case "fuzz" -> fuzz(locks, backend, name, Path.of(args[6]), Integer.parseInt(args[7]),
            Integer.parseInt(args[8]));
        case "hold" -> {
          Lock lock = locks.acquire(name, Duration.ofSeconds(30));
          System.out.println("ACQUIRED " + lock.token());
          Thread.sleep(Long.MAX_VALUE); // until SIGKILL
        }
        case "try-hold-as" -> {
          Optional<Lock> lock = locks.tryAcquire(name);
          if (lock.isEmpty()) {
            System.out.println("BUSY " + backend.leaseStore().read("lock:" + name)
                .map(r -> r.owner() + " " + r.epoch()).orElse("nobody"));
          } else {
            System.out.println("ACQUIRED " + lock.get().token());
            Thread.sleep(Long.MAX_VALUE); // until SIGKILL
          }
        }
        case "pause" -> {
          String resource = args[6];
          Path go = Path.of(args[7]);
          Lock lock = locks.acquire(name, Duration.ofSeconds(30));
          if (!backend.fencedWrite(resource, lock.token(), "child-early")) {
            throw new IllegalStateException("the first fenced write was rejected");
          }
          if (!lock.isHeld()) {
            throw new IllegalStateException("lock not held right after acquiring");
          }
          // The classic mistake fencing guards against: check the lock, then get paused before
          // the write; the write then happens after the lock has changed hands.
          System.out.println("READY " + lock.token());
          while (!Files.exists(go)) {
            Thread.sleep(10);
          }
          boolean applied = backend.fencedWrite(resource, lock.token(), "child-late");
          System.out.println("LATE_WRITE " + (applied ? "applied" : "rejected"));
          if (!lost.await(30, TimeUnit.SECONDS)) {
            System.out.println("NOT_TOLD_OF_LOSS");
          }
          System.out.println("HELD_AFTER " + lock.isHeld());
          lock.close();
        }
        default -> throw new IllegalArgumentException("unknown mode " + mode);
      }
    } finally {
      locks.close();
      backend.close();
    }
    System.exit(0);
  }

  @SuppressWarnings("deprecation")
  private static void setOwnerLabel(LockProvider.Builder builder, String label) {
    builder.ownerId(label);
  }

  private static void fuzz(LockProvider locks, LockTestBackend backend, String name, Path ledger,
      int seconds, int threadCount) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    AtomicLong acquisitions = new AtomicLong();
    AtomicLong rejected = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    String pid = Long.toString(ProcessHandle.current().pid());
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < threadCount; t++) {
      String who = pid + "/" + t;
      Thread thread = new Thread(() -> {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (System.nanoTime() < end) {
          try {
            Optional<Lock> maybe = random.nextBoolean() ? locks.tryAcquire(name)
                : Optional.of(locks.acquire(name, Duration.ofSeconds(20)));
            if (maybe.isEmpty()) {
              Thread.sleep(random.nextInt(3));
              continue;
            }
            try (Lock lock = maybe.get()) {
              append(ledger, "ENTER " + lock.token() + " " + who);
              acquisitions.incrementAndGet();
              if (!backend.fencedWrite("fuzz-" + name, lock.token(), who)) {
                rejected.incrementAndGet();
              }
              if (random.nextInt(4) == 0) {
                Thread.sleep(random.nextInt(15));
              }
              append(ledger, "EXIT " + lock.token() + " " + who);
            }
          } catch (Exception e) {
            errors.incrementAndGet();
            System.out.println("ERROR " + who + " " + e);
          }
        }
      }, "fuzz-" + t);
      threads.add(thread);
      thread.start();
    }
    for (Thread thread : threads) {
      thread.join();
    }
    System.out.println("DONE " + acquisitions.get() + " " + rejected.get() + " " + errors.get());
  }

  /** One write(2) with O_APPEND per line: lines of both processes interleave whole, in order. */
  private static void append(Path ledger, String line) {
    try {
      Files.write(ledger, (line + "\n").getBytes(StandardCharsets.UTF_8),
          StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
