package dev.sluice.spring.boot;

import dev.sluice.SluiceException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * Store calls of health checks and status reads, bounded in time: a database that stops answering
 * makes a probe fail within {@code sluice.health.timeout} instead of holding it until the driver
 * gives up. The call itself goes on, on a daemon thread, until the store's own timeout ends it.
 */
public final class Bounded {
  private static final ExecutorService CALLS = new ThreadPoolExecutor(0, 16, 30, TimeUnit.SECONDS,
      new SynchronousQueue<>(), r -> {
        Thread t = new Thread(r, "sluice-health");
        t.setDaemon(true);
        return t;
      }, new ThreadPoolExecutor.AbortPolicy());

  private Bounded() {}

  /**
   * {@code call}'s result within {@code timeout}.
   *
   * @throws SluiceException naming the timeout if it took longer, or with the call's failure
   */
  public static <T> T call(String what, Duration timeout, Supplier<T> call) {
    CompletableFuture<T> f;
    try {
      f = CompletableFuture.supplyAsync(call, CALLS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      throw new SluiceException("too many " + what + " calls waiting for the store", e);
    }
    try {
      return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new SluiceException(what + " did not answer within " + timeout, e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      throw cause instanceof RuntimeException r ? r : new SluiceException(what + " failed: " + cause, cause);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SluiceException("interrupted while waiting for " + what, e);
    }
  }
}
