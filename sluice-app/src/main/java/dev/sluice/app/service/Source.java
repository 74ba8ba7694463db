package dev.sluice.app.service;

import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.source.SourceBackend;
import java.time.Duration;

/**
 * Where the service reads changes from and keeps its state: the shared {@link SourceBackend} of a
 * MongoDB deployment ({@link MongoSource}) or a PostgreSQL database ({@link PostgresSource}), built
 * from the file's {@code mongodb} or {@code postgres} section (ADR 0128), with what only the
 * service does with it: the feed of a listener entry, its description in messages, the checks
 * before a start, {@code /status} and {@code sluice replay}. {@link Wiring} builds everything else
 * the same way for either.
 *
 * @param <D> the source's document type
 */
interface Source<D> extends AutoCloseable {

  /** The source of {@code config}: its {@code mongodb} or its {@code postgres} section. */
  static Source<?> of(SluiceConfig config, boolean service) {
    return config.postgres() != null ? new PostgresSource(config.postgres(), config.listeners())
        : new MongoSource(config.mongodb(), service);
  }

  /** The backend: feeds, lease and dead-letter stores, reachability, shared with the connector. */
  SourceBackend<D> backend();

  /** The server's name in messages: {@code MongoDB}, {@code PostgreSQL}. */
  default String name() {
    return backend().name();
  }

  /**
   * The configuration error behind {@code failure}, when the server refused the configuration
   * itself (a password, a user, a database that does not exist): waiting for the server cannot
   * help. Null when the failure may pass (the server is down or slow).
   */
  default dev.sluice.ConfigurationException refusal(RuntimeException failure) {
    return null;
  }

  /**
   * Checks, before anything is created, what reading entry {@code l} needs of the server that only
   * an operator can fix (PostgreSQL: {@code wal_level}, the publication and its table), and throws
   * a {@link dev.sluice.ConfigurationException} naming the fix; a server that cannot be reached
   * throws what is retried. Nothing to check by default.
   */
  default void checkReadable(ListenerSection l, String at) {}

  /** What a listener entry relays, in messages and the status JSON: {@code collection} or {@code table}. */
  default String targetKind() {
    return backend().targetKind();
  }

  /** The entry's collection or table with its database, for log lines ({@code shop.orders}). */
  String describe(ListenerSection l);

  /** The change feed of entry {@code l} ({@code at}: its path in the file, for messages). */
  ChangeFeed<D> feed(ListenerSection l, String at);

  /** The lease store; each call bounded by {@code bound}, or by the store's default when null. */
  default LeaseStore leaseStore(Duration bound) {
    return backend().leaseStore(bound);
  }

  /**
   * The dead-letter store (its table or collection created when needed); each call bounded by
   * {@code bound}, or by the default when null.
   */
  default DeadLetterStore<D> deadLetters(Duration bound) {
    return backend().deadLetters(bound);
  }

  /** How many changes of {@code scope} ({@code group/stream}) {@code store} holds. */
  default long parked(DeadLetterStore<D> store, String scope) {
    return backend().parked(store, scope);
  }

  /**
   * Registers the source's own meters for a started listener (PostgreSQL: the WAL its slots keep
   * and how much more may be written before the server invalidates them); none by default.
   */
  default void bindMeters(io.micrometer.core.instrument.MeterRegistry registry, dev.sluice.listener.Listener<D> listener) {}

  /**
   * What the source keeps for each partition of {@code listener}, for {@code /status}
   * (PostgreSQL: each slot and the WAL it retains), or null when it keeps nothing (the default).
   * {@code records} are the lease store's records, or null when they could not be read.
   */
  default java.util.List<java.util.Map<String, Object>> slots(dev.sluice.listener.Listener<D> listener,
      java.util.List<dev.sluice.lease.LeaseRecord> records) {
    return null;
  }

  /**
   * Publishes every document or row of entry {@code l} as it is now, as {@code SNAPSHOT} changes
   * with ids {@code <replayId>:<key>}, to {@code handler} ({@code sluice replay --from current}).
   */
  dev.sluice.sink.Replay.Result replayCurrentState(ListenerSection l, String at, String replayId,
      dev.sluice.listener.Handler<D> handler);

  /** The JSON form of documents in the sinks' envelope. */
  DocumentMapper<D> mapper();

  /**
   * Null when the server answers a bounded request (at most {@link ServiceHealth#BOUND}), else
   * the problem in one line naming the server.
   */
  default String problem() {
    try {
      backend().ping(ServiceHealth.BOUND);
      return null;
    } catch (Exception e) {
      return name() + " does not answer: " + Messages.oneLine(e);
    }
  }

  /** Closes the backend; {@link Wiring#close()} bounds how long that is waited for (docs/adr/0103). */
  @Override
  default void close() {
    backend().close();
  }
}
