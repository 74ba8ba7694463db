package dev.sluice.jdbc.lease;

import dev.sluice.lease.Lease;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A lease holder in a process of its own, for {@link PostgresSessionLivenessTest}: takes one lease
 * with session liveness (PostgreSQL or MariaDB, by the URL), prints {@code HELD <epoch>}, and renews it every third of the lease, printing
 * {@code RENEWED}, until it is killed or paused. Args: JDBC URL, table, lease name, lease ms, bound ms.
 */
public final class SessionHolderProcess {
  private SessionHolderProcess() {}

  public static void main(String[] args) throws Exception {
    javax.sql.DataSource ds;
    if (args[0].startsWith("jdbc:postgresql:")) {
      PGSimpleDataSource pg = new PGSimpleDataSource();
      pg.setUrl(args[0]);
      ds = pg;
    } else {
      ds = new MariaDbDataSource(args[0]);
    }
    Duration lease = Duration.ofMillis(Long.parseLong(args[3]));
    SqlLeaseStore store = SqlLeaseStore.builder(ds).table(args[1])
        .sessionLiveness(Duration.ofMillis(Long.parseLong(args[4]))).build();
    Lease held = store.tryAcquire(args[2], "holder-process", lease)
        .orElseThrow(() -> new IllegalStateException(args[2] + " is held by someone else"));
    if (store.liveness(held) == null) {
      throw new IllegalStateException("granted without a session");
    }
    System.out.println("HELD " + held.epoch());
    while (true) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(lease.toMillis() / 3));
      held = store.renew(held, lease);
      System.out.println("RENEWED " + held.expiresAt());
    }
  }
}
