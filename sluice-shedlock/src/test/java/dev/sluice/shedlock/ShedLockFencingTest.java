package dev.sluice.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.ErrorCategory;
import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import com.mongodb.client.result.UpdateResult;
import dev.sluice.lock.LockProvider;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockExtender;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockingTaskExecutor.TaskResult;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * What a ShedLock user gains by switching: the fencing token inside the locked task, through
 * ShedLock's own executor, and a run that overran {@code lockAtMostFor} stopped by the token.
 */
class ShedLockFencingTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final LockProvider nodeA = LockProvider.on(store()).ownerLabel("node-a").build();
  private final LockProvider nodeB = LockProvider.on(store()).ownerLabel("node-b").build();
  private final LockingTaskExecutor executorA =
      new DefaultLockingTaskExecutor(SluiceShedLockProvider.of(nodeA));
  private final LockingTaskExecutor executorB =
      new DefaultLockingTaskExecutor(SluiceShedLockProvider.of(nodeB));
  private final MongoCollection<Document> report =
      MONGO.client().getDatabase("shedlock").getCollection("fenced_report");

  private static MongoLeaseStore store() {
    return MongoLeaseStore.builder(MONGO.client().getDatabase("shedlock"))
        .collection("shedlock_fencing").build();
  }

  @AfterEach
  void close() {
    nodeA.close();
    nodeB.close();
  }

  private static LockConfiguration job(String name, Duration atMostFor) {
    return new LockConfiguration(Instant.now(), name, atMostFor, Duration.ZERO);
  }

  @Test
  void theLockedTaskReadsItsTokenAndEachRunHasAHigherOne() throws Throwable {
    String name = "job-" + UUID.randomUUID();
    TaskResult<Long> first = executorA.executeWithLock(
        () -> SluiceShedLockProvider.currentToken(name).orElseThrow(),
        job(name, Duration.ofMinutes(1)));
    TaskResult<Long> second = executorB.executeWithLock(
        () -> SluiceShedLockProvider.currentToken(name).orElseThrow(),
        job(name, Duration.ofMinutes(1)));
    assertThat(first.wasExecuted()).isTrue();
    assertThat(second.wasExecuted()).isTrue();
    assertThat(second.getResult()).isGreaterThan(first.getResult());
    assertThat(SluiceShedLockProvider.currentToken(name)).as("outside the task").isEmpty();

    // Another thread, or another lock name, sees no token.
    TaskResult<OptionalLong> elsewhere = executorA.executeWithLock(
        () -> CompletableFuture.supplyAsync(() -> SluiceShedLockProvider.currentToken(name)).get(),
        job(name, Duration.ofMinutes(1)));
    assertThat(elsewhere.getResult()).isEmpty();
  }

  @Test
  void aReleaseWithoutLockAtLeastForFreesTheLockAtOnceWhateverClockMadeTheConfiguration() {
    String name = "job-" + UUID.randomUUID();
    SluiceShedLockProvider provider = SluiceShedLockProvider.of(nodeA);
    // Instant.now() has microseconds, ShedLock's ClockProvider milliseconds; a configuration made
    // on a clock a second ahead must not turn lockAtLeastFor 0 into a hold after release either.
    for (Instant createdAt : new Instant[] {Instant.now(), Instant.now().plusSeconds(1)}) {
      for (int i = 0; i < 50; i++) {
        LockConfiguration configuration =
            new LockConfiguration(createdAt, name, Duration.ofSeconds(30), Duration.ZERO);
        provider.lock(configuration).orElseThrow(() -> new AssertionError("not granted right after"
            + " a release: " + configuration)).unlock();
      }
    }
  }

  @Test
  void lockExtenderKeepsTheTokenAndTheLockTaken() throws Throwable {
    String name = "job-" + UUID.randomUUID();
    TaskResult<long[]> result = executorA.executeWithLock(() -> {
      long before = SluiceShedLockProvider.currentToken(name).orElseThrow();
      LockExtender.extendActiveLock(Duration.ofMinutes(2), Duration.ZERO);
      // Past the first 2 s, the other node is still locked out. From another thread: ShedLock
      // runs a task whose lock this thread holds without locking. (2 s, not less: a grant that
      // reaches a loaded machine after its lockAtMostFor ran out is refused, not run unprotected.)
      await().during(Duration.ofMillis(2300)).atMost(Duration.ofSeconds(8))
          .pollInterval(Duration.ofMillis(50))
          .until(() -> !CompletableFuture.supplyAsync(
              () -> run(executorB, () -> 1, job(name, Duration.ofMinutes(1)))).get().wasExecuted());
      return new long[] {before, SluiceShedLockProvider.currentToken(name).orElseThrow()};
    }, job(name, Duration.ofSeconds(2)));
    assertThat(result.wasExecuted()).isTrue();
    assertThat(result.getResult()[1]).isEqualTo(result.getResult()[0]);
  }

  @Test
  void aRunThatOverranLockAtMostForIsStoppedByTheTokenNotByTheLock() throws Throwable {
    String name = "job-" + UUID.randomUUID();
    String resource = "report-" + name;
    CountDownLatch aHasLock = new CountDownLatch(1);
    CountDownLatch bWrote = new CountDownLatch(1);
    // Node A's run hangs past its 1.5 s lockAtMostFor (a GC pause, a slow call) ...
    CompletableFuture<Boolean> aWrite = CompletableFuture.supplyAsync(() -> run(executorA, () -> {
      long token = SluiceShedLockProvider.currentToken(name).orElseThrow();
      aHasLock.countDown();
      assertThat(bWrote.await(30, TimeUnit.SECONDS)).isTrue();
      return fencedWrite(resource, token, "from A");
    }, job(name, Duration.ofMillis(1500))).getResult());
    assertThat(aHasLock.await(30, TimeUnit.SECONDS)).isTrue();
    // ... so the next trigger on node B runs, with a higher token, and writes first.
    TaskResult<Boolean> bRun = await().atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(20))
        .until(() -> run(executorB, () -> {
          long token = SluiceShedLockProvider.currentToken(name).orElseThrow();
          return fencedWrite(resource, token, "from B");
        }, job(name, Duration.ofMinutes(1))), TaskResult::wasExecuted);
    assertThat(bRun.getResult()).isTrue();
    bWrote.countDown();

    assertThat(aWrite.get(30, TimeUnit.SECONDS)).as("A's late write is rejected").isFalse();
    assertThat(report.find(Filters.eq("_id", resource)).first().getString("value"))
        .isEqualTo("from B");
  }

  private static <T> TaskResult<T> run(LockingTaskExecutor executor,
      LockingTaskExecutor.TaskWithResult<T> task, LockConfiguration configuration) {
    try {
      return executor.executeWithLock(task, configuration);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable e) {
      throw new IllegalStateException(e);
    }
  }

  /** The fenced write docs/locks.md asks for: only a token above the last one seen applies. */
  private boolean fencedWrite(String resource, long token, String value) {
    try {
      UpdateResult r = report.updateOne(
          Filters.and(Filters.eq("_id", resource), Filters.lt("fence", token)),
          Updates.combine(Updates.set("fence", token), Updates.set("value", value)),
          new UpdateOptions().upsert(true));
      return r.getMatchedCount() == 1 || r.getUpsertedId() != null;
    } catch (MongoWriteException e) {
      if (e.getError().getCategory() == ErrorCategory.DUPLICATE_KEY) {
        return false; // a higher token wrote first: the upsert of a lower one collides on _id
      }
      throw e;
    }
  }
}
