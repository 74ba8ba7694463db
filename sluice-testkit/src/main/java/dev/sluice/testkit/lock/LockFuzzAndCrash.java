package dev.sluice.testkit.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.lease.LeaseRecord;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.testkit.process.ChildJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Multi-process lock tests every backend runs: two JVMs contending for 10 s with a shared ledger,
 * a holder killed with SIGKILL, a holder paused with SIGSTOP past its lease. Subclasses name the
 * {@link LockTestBackend} class and the argument that opens it in every JVM.
 */
public abstract class LockFuzzAndCrash {
  private static final Duration LEASE = Duration.ofMillis(2000);
  private static final Duration EXTEND = Duration.ofMillis(300);
  private static final int FUZZ_SECONDS = 10;
  private static final int FUZZ_THREADS_PER_JVM = 4;

  @TempDir
  Path dir;

  private final List<ChildJvm> children = new ArrayList<>();
  private LockTestBackend backend;
  private LockProvider locks;

  protected abstract Class<? extends LockTestBackend> backendClass();

  protected abstract String backendArgument();

  @BeforeEach
  void open() throws Exception {
    backend = backendClass().getDeclaredConstructor().newInstance().open(backendArgument());
    locks = LockProvider.on(backend.leaseStore()).leaseDuration(LEASE).extendEvery(EXTEND)
        .backoff(Duration.ofMillis(10), Duration.ofMillis(100)).build();
  }

  @AfterEach
  void cleanUp() throws IOException {
    for (ChildJvm child : children) {
      child.dumpOutput(dir.resolve(child.name() + ".log"));
      child.close();
    }
    locks.close();
    backend.close();
  }

  private ChildJvm child(String childName, String mode, String lockName, String... extra) {
    List<String> args = new ArrayList<>(List.of(mode, backendClass().getName(), backendArgument(),
        lockName, Long.toString(LEASE.toMillis()), Long.toString(EXTEND.toMillis())));
    args.addAll(List.of(extra));
    ChildJvm child = ChildJvm.start(childName, LockChildMain.class, args.toArray(String[]::new));
    children.add(child);
    return child;
  }

  private static String uniqueName(String what) {
    return "fz-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  @Test
  void threadsInTwoJvmsContendingForTenSecondsNeverOverlapAndTokensStrictlyIncrease()
      throws IOException {
    String name = uniqueName("fuzz");
    Path ledger = dir.resolve("ledger.txt");
    String[] fuzzArgs = {ledger.toString(), Integer.toString(FUZZ_SECONDS),
        Integer.toString(FUZZ_THREADS_PER_JVM)};
    ChildJvm a = child("fuzz-a", "fuzz", name, fuzzArgs);
    ChildJvm b = child("fuzz-b", "fuzz", name, fuzzArgs);

    Duration limit = Duration.ofSeconds(FUZZ_SECONDS + 60);
    String doneA = a.awaitLineStartingWith("DONE ", limit);
    String doneB = b.awaitLineStartingWith("DONE ", limit);
    assertThat(a.awaitExit(Duration.ofSeconds(30))).isZero();
    assertThat(b.awaitExit(Duration.ofSeconds(30))).isZero();

    long[] resultA = counts(doneA);
    long[] resultB = counts(doneB);
    assertThat(resultA[0]).as("acquisitions in JVM a").isPositive();
    assertThat(resultB[0]).as("acquisitions in JVM b").isPositive();
    assertThat(resultA[1] + resultB[1]).as("fenced writes rejected").isZero();
    assertThat(resultA[2] + resultB[2]).as("errors (see child output)").isZero();

    List<String> lines = Files.readAllLines(ledger);
    System.out.printf("%s fuzz: JVM a %s, JVM b %s (acquisitions rejected errors), ledger %d lines%n",
        getClass().getSimpleName(), doneA, doneB, lines.size());
    assertThat(lines).hasSize((int) (2 * (resultA[0] + resultB[0])));
    long lastToken = 0;
    for (int i = 0; i < lines.size(); i += 2) {
      String[] enter = lines.get(i).split(" ");
      String[] exit = lines.get(i + 1).split(" ");
      assertThat(enter[0]).as("line %d: %s", i, lines.get(i)).isEqualTo("ENTER");
      assertThat(exit[0]).as("line %d must close the holder of line %d (overlap otherwise): %s",
          i + 1, i, lines.get(i + 1)).isEqualTo("EXIT");
      assertThat(exit[1]).as("token at line %d", i + 1).isEqualTo(enter[1]);
      assertThat(exit[2]).as("holder at line %d", i + 1).isEqualTo(enter[2]);
      long token = Long.parseLong(enter[1]);
      assertThat(token).as("token at line %d", i).isGreaterThan(lastToken);
      lastToken = token;
    }
    assertThat(backend.read("fuzz-" + name)).startsWith(lastToken + "=");
  }

  private static long[] counts(String done) {
    String[] parts = done.split(" ");
    return new long[] {Long.parseLong(parts[1]), Long.parseLong(parts[2]),
        Long.parseLong(parts[3])};
  }

  @Test
  void aHolderKilledWithSigkillLosesTheLockByExpiry() {
    String name = uniqueName("kill");
    ChildJvm holder = child("holder", "hold", name);
    long childToken = Long.parseLong(
        holder.awaitLineStartingWith("ACQUIRED ", Duration.ofSeconds(60)).split(" ")[1]);
    assertThat(locks.tryAcquire(name)).isEmpty();

    holder.kill();

    LeaseRecord afterKill = backend.leaseStore().read("lock:" + name).orElseThrow();
    assertThat(afterKill.epoch()).isEqualTo(childToken);
    assertThat(afterKill.owner()).as("a killed holder releases nothing").isNotNull();
    try (Lock lock = locks.acquire(name, Duration.ofSeconds(30))) {
      assertThat(lock.token()).isGreaterThan(childToken);
      assertThat(backend.leaseStore().now())
          .as("taken over only once the dead holder's lease ran out on the store's clock")
          .isAfterOrEqualTo(afterKill.expiresAt());
    }
  }

  @Test
  void twoJvmsGivenTheSameOwnerLabelNeverBothHoldTheLock() {
    // Two instances of one service deployed with the same configuration: ownerId("billing").
    String name = uniqueName("label");
    ChildJvm first = child("billing-1", "try-hold-as", name, "billing");
    long firstToken = Long.parseLong(
        first.awaitLineStartingWith("ACQUIRED ", Duration.ofSeconds(60)).split(" ")[1]);

    ChildJvm second = child("billing-2", "try-hold-as", name, "billing");
    String answer = second.awaitLine(
        line -> line.startsWith("ACQUIRED ") || line.startsWith("BUSY "), Duration.ofSeconds(60));
    assertThat(answer).as("the second JVM labelled 'billing' while the first holds the lock")
        .startsWith("BUSY billing/").endsWith(" " + firstToken);
    assertThat(second.awaitExit(Duration.ofSeconds(30))).isZero();
    assertThat(first.isAlive()).isTrue();

    first.kill();
    try (Lock lock = locks.acquire(name, Duration.ofSeconds(30))) {
      assertThat(lock.token()).isGreaterThan(firstToken);
    }
  }

  @Test
  void aHolderPausedWithSigstopPastItsLeaseLosesItAndItsLateFencedWriteIsRejected()
      throws IOException {
    String name = uniqueName("pause");
    String resource = "paused-" + name;
    Path go = dir.resolve("go");
    ChildJvm holder = child("paused", "pause", name, resource, go.toString());
    long childToken = Long.parseLong(
        holder.awaitLineStartingWith("READY ", Duration.ofSeconds(60)).split(" ")[1]);
    assertThat(backend.read(resource)).isEqualTo(childToken + "=child-early");

    holder.pause();
    try (Lock lock = locks.acquire(name, Duration.ofSeconds(30))) {
      assertThat(lock.token()).isGreaterThan(childToken);
      assertThat(backend.fencedWrite(resource, lock.token(), "new-holder")).isTrue();
      Files.createFile(go);
      holder.resume();

      assertThat(holder.awaitLineStartingWith("LATE_WRITE ", Duration.ofSeconds(30)))
          .isEqualTo("LATE_WRITE rejected");
      holder.awaitLineStartingWith("LOST " + childToken, Duration.ofSeconds(30));
      assertThat(holder.awaitLineStartingWith("HELD_AFTER ", Duration.ofSeconds(30)))
          .isEqualTo("HELD_AFTER false");
      assertThat(holder.awaitExit(Duration.ofSeconds(30))).isZero();

      assertThat(backend.read(resource)).isEqualTo(lock.token() + "=new-holder");
      assertThat(lock.isHeld()).as("the paused holder's close released nothing").isTrue();
      assertThat(backend.leaseStore().read("lock:" + name).orElseThrow().epoch())
          .isEqualTo(lock.token());
    }
  }
}
