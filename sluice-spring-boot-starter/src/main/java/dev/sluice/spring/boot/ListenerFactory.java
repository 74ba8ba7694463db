package dev.sluice.spring.boot;

import com.mongodb.client.MongoClient;
import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.ListenerSettings;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.spring.boot.SluiceProperties.ListenerProperties;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.bson.BsonDocument;

/**
 * Builds the listener of one {@code sluice.listeners.<name>} entry with the same builders an
 * application would call itself ({@code MongoChangeFeed.builder}, {@code Listener.builder}), on the
 * application's MongoClient and the lease store bean. A value a builder refuses fails with the
 * property named: {@code sluice.listeners.<name>: leaseDuration must be at least PT1S, ...}.
 */
final class ListenerFactory {

  /** What the application context provides; the optional parts are null when absent. */
  record Beans(
      SluiceProperties properties,
      LeaseStore leaseStore,
      MongoClient mongoClient,
      String defaultDatabase,
      DeadLetterStore<BsonDocument> deadLetters,
      Object meterRegistry,
      List<ListenerObserver> observers,
      String ownerLabel) {}

  private final Beans beans;

  ListenerFactory(Beans beans) {
    this.beans = beans;
  }

  /**
   * The container of listener {@code name}.
   *
   * @param p its properties (an empty entry when only the annotation declares it)
   * @param annotation the {@link SluiceListener} declaring it, or null
   */
  SluiceListenerContainer container(String name, ListenerProperties p, SluiceListener annotation,
      Handler<BsonDocument> handler) {
    String at = "sluice.listeners." + name;
    String collection = first(p.getCollection(), annotation == null ? null : annotation.collection());
    if (collection == null) {
      throw new ConfigurationException(at + ".collection must be set: the MongoDB collection the listener reads");
    }
    String group = first(p.getGroup(), annotation == null ? null : annotation.group(), name);
    int partitions = p.getPartitions() != null ? p.getPartitions()
        : annotation != null && annotation.partitions() > 0 ? annotation.partitions()
        : ListenerSettings.PARTITIONS.defaultValue();
    if (beans.mongoClient() == null) {
      throw new ConfigurationException(at + ": the listener reads a MongoDB change stream and needs a MongoClient"
          + " bean (spring.data.mongodb.uri, or a bean of your own)");
    }
    String database = first(p.getDatabase(), beans.defaultDatabase());
    if (database == null) {
      throw new ConfigurationException(at + ".database must be set (or sluice.store.mongodb.database)");
    }
    Supplier<Listener<?>> factory = () -> {
      try {
        return build(name, p, handler, database, collection, group, partitions);
      } catch (ConfigurationException e) {
        throw new ConfigurationException(at + ": " + e.getMessage());
      }
    };
    return new SluiceListenerContainer(name, factory, p.isAutoStartup());
  }

  private Listener<BsonDocument> build(String name, ListenerProperties p, Handler<BsonDocument> handler,
      String database, String collection, String group, int partitions) {
    MongoChangeFeed feed = MongoChangeFeed.builder(beans.mongoClient(), database, collection)
        .onInvalidate(p.getOnInvalidate())
        .build();
    RetryPolicy retry = RetryPolicy.attempts(p.getRetry().getAttempts(), p.getRetry().getInitialDelay(),
        p.getRetry().getMaxDelay());
    FailurePolicy failure = p.getOnFailure() == SluiceProperties.FailureMode.PARK
        ? FailurePolicy.park(retry, deadLetters(database))
        : FailurePolicy.block(retry);
    Metrics metrics = beans.meterRegistry() == null ? null : Metrics.of(beans.meterRegistry(), group);
    List<ListenerObserver> observers = new ArrayList<>(beans.observers());
    if (metrics != null) {
      observers.add(metrics.observer());
    }
    Listener.Builder<BsonDocument> b = Listener.builder(feed, beans.leaseStore())
        .group(group)
        .handler(handler)
        .partitions(partitions)
        .concurrency(p.getConcurrency())
        .leaseDuration(ListenerSettings.LEASE_DURATION.orDefault(p.getLeaseDuration()))
        .checkpoint(new CheckpointPolicy(p.getCheckpoint().getEvery(), p.getCheckpoint().getMaxDelay(),
            p.getCheckpoint().getHeartbeat(), p.getCheckpoint().getFlushesInFlight()))
        .bootstrap(ListenerSettings.bootstrap(p.getBootstrap(), "bootstrap"))
        .onHistoryLost(p.getOnHistoryLost())
        .onFailure(failure)
        .observer(ListenerObserver.composite(observers.toArray(ListenerObserver[]::new)));
    if (beans.ownerLabel() != null) {
      b.owner(beans.ownerLabel());
    }
    if (p.getThreads() != null) {
      b.threads(p.getThreads());
    }
    if (p.getRenewInterval() != null) {
      b.renewInterval(p.getRenewInterval());
    }
    if (p.getAcquireInterval() != null) {
      b.acquireInterval(p.getAcquireInterval());
    }
    if (p.getPollWait() != null) {
      b.pollWait(p.getPollWait());
    }
    Listener<BsonDocument> listener = b.build();
    if (metrics != null) {
      metrics.watch(listener);
    }
    return listener;
  }

  private DeadLetterStore<BsonDocument> deadLetters(String database) {
    if (beans.deadLetters() != null) {
      return beans.deadLetters();
    }
    return MongoDeadLetterStore.create(beans.mongoClient().getDatabase(database),
        beans.properties().getStore().getMongodb().getDeadLetterCollection());
  }

  /** The first value that is neither null nor blank, or null. */
  private static String first(String... values) {
    for (String v : values) {
      if (v != null && !v.isBlank()) {
        return v;
      }
    }
    return null;
  }
}
