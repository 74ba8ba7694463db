package dev.sluice.mongodb.lease;

import com.mongodb.MongoCommandException;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.MongoCollection;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonRegularExpression;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Release notices of the MongoDB lease store ({@code LeaseStore#watchReleases}): a change stream on
 * the lease collection, filtered to releases ({@code owner} set to null) and deletions of records
 * under one prefix, on a daemon thread. A hint only: it reopens after errors with back-off and
 * gives up quietly where change streams are not available (a standalone server, no privilege).
 * When the oplog rolled past its position (error 136 CappedPositionLost, or 286 on re-opening) it
 * re-opens at once at the latest position: the releases in between are not noticed, which only
 * delays those takeovers to the peers' next acquisition attempt ({@code docs/adr/0081}).
 */
final class ReleaseWatch implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ReleaseWatch.class);
  /** Change streams unavailable (standalone: 40573), not authorized (13), unknown stage (40324). */
  private static final Set<Integer> UNAVAILABLE = Set.of(40573, 13, 40324);
  /** The watch's position is gone from the oplog: CappedPositionLost (a live cursor), ChangeStreamHistoryLost. */
  private static final Set<Integer> POSITION_LOST = Set.of(136, 286);
  private static final long IDLE_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
  /** A position loss re-opens at once unless the last one was this recent. */
  private static final long POSITION_LOSS_SPACING_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final MongoCollection<BsonDocument> leases;
  private final String prefix;
  private final Consumer<String> released;
  private final long maxAwaitMillis;
  private final Thread thread;
  private volatile boolean closed;
  /** The cursor {@link #start()} opened, handed to the thread. */
  private volatile MongoCursor<BsonDocument> first;

  ReleaseWatch(MongoCollection<BsonDocument> leases, String prefix, Consumer<String> released) {
    this.leases = leases;
    this.prefix = prefix;
    this.released = released;
    Long timeout = leases.getTimeout(TimeUnit.MILLISECONDS);
    this.maxAwaitMillis = timeout == null ? 1000 : Math.max(1, Math.min(1000, timeout / 2));
    this.thread = new Thread(this::run, "sluice-release-watch-" + prefix);
    this.thread.setDaemon(true);
  }

  /**
   * Opens the change stream before returning, so that every release after this call is seen (a
   * cursor opened later by the thread would miss those in between), then reads it on the thread.
   */
  ReleaseWatch start() {
    try {
      first = open();
    } catch (MongoCommandException e) {
      if (UNAVAILABLE.contains(e.getErrorCode())) {
        unavailable(e);
        return this;
      }
      log.debug("Release notices for {} not open yet ({}); the watch thread retries", prefix, e.toString());
    } catch (RuntimeException e) {
      log.debug("Release notices for {} not open yet ({}); the watch thread retries", prefix, e.toString());
    }
    thread.start();
    return this;
  }

  private MongoCursor<BsonDocument> open() {
    return leases.watch(pipeline(), BsonDocument.class)
        .maxAwaitTime(maxAwaitMillis, TimeUnit.MILLISECONDS).withDocumentClass(BsonDocument.class).cursor();
  }

  private void unavailable(MongoCommandException e) {
    log.info("No release notices for {} (change streams unavailable: {}); peers take released partitions at"
        + " their next attempt", prefix, e.getErrorMessage());
  }

  private List<BsonDocument> pipeline() {
    BsonDocument ours = new BsonDocument("documentKey._id",
        new BsonRegularExpression("^" + Pattern.quote(prefix)));
    BsonDocument releaseOrDelete = new BsonDocument("$or", new BsonArray(List.of(
        new BsonDocument("operationType", new BsonString("delete")),
        new BsonDocument("operationType", new BsonString("update"))
            .append("updateDescription.updatedFields." + MongoLeaseStoreImpl.OWNER,
                new BsonDocument("$type", new BsonString("null"))))));
    return List.of(new BsonDocument("$match", new BsonDocument("$and", new BsonArray(List.of(ours, releaseOrDelete)))));
  }

  private void run() {
    long backoffMillis = 500;
    long lastLossNanos = System.nanoTime() - POSITION_LOSS_SPACING_NANOS;
    while (!closed) {
      MongoCursor<BsonDocument> opened = first;
      first = null;
      try (MongoCursor<BsonDocument> cursor = opened != null ? opened : open()) {
        backoffMillis = 500;
        while (!closed) {
          long asked = System.nanoTime();
          BsonDocument event = cursor.tryNext();
          if (event != null) {
            notice(event);
          } else if (System.nanoTime() - asked < TimeUnit.MILLISECONDS.toNanos(maxAwaitMillis) / 2) {
            LockSupport.parkNanos(IDLE_PAUSE_NANOS); // a server that does not hold idle reads
          }
        }
      } catch (MongoCommandException e) {
        if (UNAVAILABLE.contains(e.getErrorCode())) {
          unavailable(e);
          return;
        }
        if (POSITION_LOST.contains(e.getErrorCode()) && !closed
            && System.nanoTime() - lastLossNanos >= POSITION_LOSS_SPACING_NANOS) {
          // The next open() starts at the latest position: no back-off, every moment waited is a
          // release not noticed. (A loss again right after it backs off as any error does.)
          lastLossNanos = System.nanoTime();
          positionLost(e);
          continue;
        }
        backoffMillis = retryLater(e, backoffMillis);
      } catch (RuntimeException e) {
        backoffMillis = retryLater(e, backoffMillis);
      }
    }
  }

  private void positionLost(MongoCommandException e) {
    log.warn("Release notices for {}: the oplog rolled past the watch's position ({} {}); re-opened at the latest"
        + " position. Releases in between were not noticed: peers take those partitions at their next"
        + " acquisition attempt instead of at once", prefix, e.getErrorCode(), e.getErrorCodeName());
  }

  private long retryLater(RuntimeException e, long backoffMillis) {
    if (closed) {
      return backoffMillis;
    }
    log.debug("Release notices for {} interrupted ({}); reopening in {} ms", prefix, e.toString(), backoffMillis);
    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(backoffMillis));
    return Math.min(backoffMillis * 2, 30_000);
  }

  private void notice(BsonDocument event) {
    BsonValue key = event.isDocument("documentKey") ? event.getDocument("documentKey").get("_id") : null;
    if (key == null || !key.isString() || !key.asString().getValue().startsWith(prefix)) {
      return;
    }
    boolean release = "delete".equals(event.getString("operationType", new BsonString("")).getValue())
        || (event.isDocument("updateDescription")
            && event.getDocument("updateDescription").isDocument("updatedFields")
            && event.getDocument("updateDescription").getDocument("updatedFields").isNull(MongoLeaseStoreImpl.OWNER));
    if (release) {
      try {
        released.accept(key.asString().getValue());
      } catch (RuntimeException e) {
        log.warn("A release notice for {} failed in its consumer: {}", key, e.toString());
      }
    }
  }

  /** Stops the watch; the thread leaves within one server wait. */
  @Override
  public void close() {
    closed = true;
  }
}
