package dev.sluice.source;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;

/**
 * A database Sluice reads changes from, built once from its typed settings and shared by every
 * front-end (the service's file, the Kafka Connect connector): the feed of each stream (a MongoDB
 * collection, a PostgreSQL table), the lease and dead-letter stores kept in the same database, the
 * JSON text of its documents, a bounded reachability check, and the client or connections it
 * holds, released by {@link #close()}. One implementation per backend, in its module: {@code
 * dev.sluice.mongodb.source.MongoBackend}, {@code dev.sluice.postgres.source.PostgresBackend} (ADR 0128).
 *
 * <p>A front-end keeps only what is its own: turning its configuration format into the backend's
 * settings, the names of its keys in messages, and what its framework owns (Connect's offsets and
 * task assignment, the service's {@code /status}).
 *
 * @param <D> the backend's document type
 */
public interface SourceBackend<D> extends AutoCloseable {

  /** The server's name in messages: {@code MongoDB}, {@code PostgreSQL}. */
  String name();

  /** What a stream is on this server, in messages: {@code collection} or {@code table}. */
  String targetKind();

  /** The feed of {@code stream} (a collection or a table) with the backend's settings. */
  ChangeFeed<D> feed(String stream);

  /** The lease store; each call bounded by {@code bound}, or by the store's default when null. */
  LeaseStore leaseStore(Duration bound);

  /**
   * The dead-letter store; each call bounded by {@code bound}, or by the default when null (and
   * then its table or collection is created when needed).
   */
  DeadLetterStore<D> deadLetters(Duration bound);

  /**
   * How many changes of {@code scope} ({@code group/stream}) {@code store}, one of this backend's,
   * holds; 0 when its table or collection was not created yet.
   */
  long parked(DeadLetterStore<D> store, String scope);

  /** {@code document} as JSON text (relaxed: numbers and text as a reader expects them). */
  String json(D document);

  /**
   * Sends the server a request bounded by {@code bound} ({@code ping}, {@code SELECT 1}) and
   * returns when it answered; throws what failed (the driver's exception, unwrapped, for the
   * front-end's message) when it did not.
   */
  void ping(Duration bound) throws Exception;

  /** Releases the backend's client or connection pool. */
  @Override
  void close();
}
