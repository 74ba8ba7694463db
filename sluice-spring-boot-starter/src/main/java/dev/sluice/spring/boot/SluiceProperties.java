package dev.sluice.spring.boot;

import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerSettings;
import dev.sluice.listener.Setting;
import dev.sluice.lock.LockProvider;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.validation.Errors;
import org.springframework.validation.Validator;
import org.springframework.validation.annotation.Validated;

/**
 * The {@code sluice.*} configuration properties. Bound with {@code ignoreUnknownFields = false}: a
 * misspelt key anywhere under {@code sluice} (in a listener entry too) fails the start naming the
 * key, instead of being ignored as Spring Boot does by default (ADR 0077). Values are checked when
 * bound ({@link #validate}); the Sluice builders check the rest when the beans are built, and every
 * message names the property.
 */
@ConfigurationProperties(prefix = "sluice", ignoreUnknownFields = false)
@Validated
public class SluiceProperties implements Validator {

  /**
   * A label for this instance in lease records and status views (at most 100 characters, no
   * '/'); never the identity, which is always unique per process. Default: spring.application.name.
   */
  private String owner;

  private final Store store = new Store();

  private final Lock lock = new Lock();

  private final Health health = new Health();

  /** The listeners, by name: each entry is a consumer group of one MongoDB collection. */
  private final Map<String, ListenerProperties> listeners = new LinkedHashMap<>();

  public String getOwner() {
    return owner;
  }

  public void setOwner(String owner) {
    this.owner = owner;
  }

  public Store getStore() {
    return store;
  }

  public Lock getLock() {
    return lock;
  }

  public Health getHealth() {
    return health;
  }

  public Map<String, ListenerProperties> getListeners() {
    return listeners;
  }

  /** Which lease store the starter builds when the application defines none. */
  public enum StoreType {
    /** MongoDB if there is a MongoClient bean, else SQL if there is a DataSource bean. */
    AUTO,
    /** MongoDB, on the application's MongoClient. */
    MONGODB,
    /** SQL (PostgreSQL, MariaDB/MySQL), on the application's DataSource; needs sluice-jdbc. */
    JDBC
  }

  /** The lease store: leases, checkpoints and locks. */
  public static class Store {
    /** Which lease store to build from the application's beans. */
    private StoreType type = StoreType.AUTO;

    private final Mongo mongodb = new Mongo();

    private final Jdbc jdbc = new Jdbc();

    public StoreType getType() {
      return type;
    }

    public void setType(StoreType type) {
      this.type = type;
    }

    public Mongo getMongodb() {
      return mongodb;
    }

    public Jdbc getJdbc() {
      return jdbc;
    }
  }

  /** The MongoDB lease store, dead letters and the listeners' default database. */
  public static class Mongo {
    /**
     * Database of the lease collection, of the dead letters and of the listeners' collections.
     * Default: spring.data.mongodb.database, else the database of spring.data.mongodb.uri.
     */
    private String database;

    /** Collection of leases, checkpoints, group members and locks. */
    private String leaseCollection = "sluice_leases";

    /** Collection of parked changes (listeners with on-failure: park). */
    private String deadLetterCollection = "sluice_dead_letters";

    /** The longest any one call of the lease store may take; keep it below the lease durations. */
    private Duration operationTimeout = MongoLeaseStore.DEFAULT_OPERATION_TIMEOUT;

    public String getDatabase() {
      return database;
    }

    public void setDatabase(String database) {
      this.database = database;
    }

    public String getLeaseCollection() {
      return leaseCollection;
    }

    public void setLeaseCollection(String leaseCollection) {
      this.leaseCollection = leaseCollection;
    }

    public String getDeadLetterCollection() {
      return deadLetterCollection;
    }

    public void setDeadLetterCollection(String deadLetterCollection) {
      this.deadLetterCollection = deadLetterCollection;
    }

    public Duration getOperationTimeout() {
      return operationTimeout;
    }

    public void setOperationTimeout(Duration operationTimeout) {
      this.operationTimeout = operationTimeout;
    }
  }

  /** The SQL lease store. */
  public static class Jdbc {
    /** Lease table, optionally schema-qualified. */
    private String table = "sluice_lease";

    /** Whether to create the table on first use; turn off where the user may not create tables. */
    private boolean createTable = true;

    /**
     * Session liveness (PostgreSQL, MariaDB 10.5+; ADR 0114): a crashed holder's leases are taken
     * about this long after the database ends its session, instead of at their expiry. Off when
     * unset. A holder that cannot confirm its session for this long gives its leases up. Listeners'
     * partitions are taken early by their standbys; a lock's holder is bound by it too, but a lock's
     * waiter still takes it at its expiry (it does not watch for gone sessions).
     */
    private Duration sessionLiveness;

    public String getTable() {
      return table;
    }

    public void setTable(String table) {
      this.table = table;
    }

    public boolean isCreateTable() {
      return createTable;
    }

    public void setCreateTable(boolean createTable) {
      this.createTable = createTable;
    }

    public Duration getSessionLiveness() {
      return sessionLiveness;
    }

    public void setSessionLiveness(Duration sessionLiveness) {
      this.sessionLiveness = sessionLiveness;
    }
  }

  /** The LockProvider bean (docs/locks.md). */
  public static class Lock {
    /** Whether to define a LockProvider bean on the lease store. */
    private boolean enabled = true;

    /** How long a lock outlives its holder's last extension: the wait after a holder crashed. */
    private Duration leaseDuration = LockProvider.DEFAULT_LEASE_DURATION;

    /** How often a held lock is extended; at most a third of lease-duration. Default: a third. */
    private Duration extendEvery;

    /** Prefix of the lease names of locks, keeping them apart from listener leases. */
    private String namePrefix = LockProvider.DEFAULT_NAME_PREFIX;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Duration getLeaseDuration() {
      return leaseDuration;
    }

    public void setLeaseDuration(Duration leaseDuration) {
      this.leaseDuration = leaseDuration;
    }

    public Duration getExtendEvery() {
      return extendEvery;
    }

    public void setExtendEvery(Duration extendEvery) {
      this.extendEvery = extendEvery;
    }

    public String getNamePrefix() {
      return namePrefix;
    }

    public void setNamePrefix(String namePrefix) {
      this.namePrefix = namePrefix;
    }
  }

  /** The Actuator health indicator and status endpoint. */
  public static class Health {
    /** A listener whose partitions are further behind the source than this shows state "lagging". */
    private Duration lagThreshold = Duration.ofMinutes(1);

    /** The longest a health check or status read waits for the lease store. */
    private Duration timeout = Duration.ofSeconds(2);

    public Duration getLagThreshold() {
      return lagThreshold;
    }

    public void setLagThreshold(Duration lagThreshold) {
      this.lagThreshold = lagThreshold;
    }

    public Duration getTimeout() {
      return timeout;
    }

    public void setTimeout(Duration timeout) {
      this.timeout = timeout;
    }
  }

  /** What a listener does with a change its handler keeps failing on, once the retries are used up. */
  public enum FailureMode {
    /** Retry for ever: the partition shows BLOCKED and does not advance. */
    BLOCK,
    /** Park the change and the later changes of its key in the dead-letter collection, and go on. */
    PARK
  }

  /**
   * One listener: a consumer group of a MongoDB collection, delivering to a Handler bean (or to a
   * method annotated with {@link SluiceListener} of the same name). The listener's settings, their
   * defaults and rules are those of {@link ListenerSettings}, in kebab case ({@code lease-duration}).
   */
  public static class ListenerProperties {
    /** Name of the Handler bean (not needed when a @SluiceListener method has this listener's name). */
    private String handler;

    /** The collection listened to (or the @SluiceListener's). */
    private String collection;

    /** The collection's database. Default: sluice.store.mongodb.database. */
    private String database;

    /** Consumer group: 1..64 letters, digits, '.', '_', '-'. Default: the listener's name. */
    private String group;

    /** Partitions, by a hash of the document key; every member of a group must use the same count. Default 1. */
    private Integer partitions;

    /** Threads that run this listener's partitions in this process. Default: one per partition, at most 64. */
    private Integer threads;

    /** Changes of one partition handled at once (never two of one key); above 1 the handler must be thread-safe. */
    private int concurrency = ListenerSettings.CONCURRENCY.defaultValue();

    /** How long a partition stays owned without renewal: the failover time after a crash (at least 1s). */
    private Duration leaseDuration = ListenerSettings.LEASE_DURATION.defaultValue();

    /** How often a held lease is renewed; at most a third of lease-duration. Default: a third. */
    private Duration renewInterval;

    /** How often an instance without the lease tries to take it. Default: the renew interval. */
    private Duration acquireInterval;

    /** Longest wait of one poll of the feed; at most the renew interval. Default 200ms, or the renew interval if shorter. */
    private Duration pollWait;

    private final Checkpoint checkpoint = new Checkpoint();

    /**
     * Where a partition without a checkpoint starts: oldest, latest, snapshot, or an ISO-8601
     * instant such as 2026-01-01T00:00:00Z.
     */
    private String bootstrap = ListenerSettings.BOOTSTRAP.defaultValue();

    /** The checkpoint fell off the oplog: stop loudly, skip to the newest change, or read every document again. */
    private HistoryLostPolicy onHistoryLost = ListenerSettings.historyLost(null, "on-history-lost");

    /** The collection was dropped, renamed or replaced by $out: stop the partition, or go on after it. */
    private MongoChangeFeed.OnInvalidate onInvalidate = MongoChangeFeed.OnInvalidate.STOP;

    /** Once the retries are used up: block the partition, or park the change (per key) and go on. */
    private FailureMode onFailure =
        FailureMode.valueOf(ListenerSettings.ON_FAILURE.defaultValue().toUpperCase(Locale.ROOT));

    private final Retry retry = new Retry();

    /** Whether the listener starts with the application context; false: start it through its bean. */
    private boolean autoStartup = true;

    public String getHandler() {
      return handler;
    }

    public void setHandler(String handler) {
      this.handler = handler;
    }

    public String getCollection() {
      return collection;
    }

    public void setCollection(String collection) {
      this.collection = collection;
    }

    public String getDatabase() {
      return database;
    }

    public void setDatabase(String database) {
      this.database = database;
    }

    public String getGroup() {
      return group;
    }

    public void setGroup(String group) {
      this.group = group;
    }

    public Integer getPartitions() {
      return partitions;
    }

    public void setPartitions(Integer partitions) {
      this.partitions = partitions;
    }

    public Integer getThreads() {
      return threads;
    }

    public void setThreads(Integer threads) {
      this.threads = threads;
    }

    public int getConcurrency() {
      return concurrency;
    }

    public void setConcurrency(int concurrency) {
      this.concurrency = concurrency;
    }

    public Duration getLeaseDuration() {
      return leaseDuration;
    }

    public void setLeaseDuration(Duration leaseDuration) {
      this.leaseDuration = leaseDuration;
    }

    public Duration getRenewInterval() {
      return renewInterval;
    }

    public void setRenewInterval(Duration renewInterval) {
      this.renewInterval = renewInterval;
    }

    public Duration getAcquireInterval() {
      return acquireInterval;
    }

    public void setAcquireInterval(Duration acquireInterval) {
      this.acquireInterval = acquireInterval;
    }

    public Duration getPollWait() {
      return pollWait;
    }

    public void setPollWait(Duration pollWait) {
      this.pollWait = pollWait;
    }

    public Checkpoint getCheckpoint() {
      return checkpoint;
    }

    public String getBootstrap() {
      return bootstrap;
    }

    public void setBootstrap(String bootstrap) {
      this.bootstrap = bootstrap;
    }

    public HistoryLostPolicy getOnHistoryLost() {
      return onHistoryLost;
    }

    public void setOnHistoryLost(HistoryLostPolicy onHistoryLost) {
      this.onHistoryLost = onHistoryLost;
    }

    public MongoChangeFeed.OnInvalidate getOnInvalidate() {
      return onInvalidate;
    }

    public void setOnInvalidate(MongoChangeFeed.OnInvalidate onInvalidate) {
      this.onInvalidate = onInvalidate;
    }

    public FailureMode getOnFailure() {
      return onFailure;
    }

    public void setOnFailure(FailureMode onFailure) {
      this.onFailure = onFailure;
    }

    public Retry getRetry() {
      return retry;
    }

    public boolean isAutoStartup() {
      return autoStartup;
    }

    public void setAutoStartup(boolean autoStartup) {
      this.autoStartup = autoStartup;
    }
  }

  /** When a listener commits the processed position. */
  public static class Checkpoint {
    /** Commit after this many changes ... */
    private int every = ListenerSettings.CHECKPOINT_EVERY.defaultValue();

    /** ... or after this long, whichever comes first. */
    private Duration maxDelay = ListenerSettings.CHECKPOINT_MAX_DELAY.defaultValue();

    /** Progress without changes (an idle or filtered collection) is committed this often. */
    private Duration heartbeat = ListenerSettings.CHECKPOINT_HEARTBEAT.defaultValue();

    /** Flushes pending while the next changes are handled; a crash delivers again at most (this + 1) x every changes. */
    private int flushesInFlight = ListenerSettings.CHECKPOINT_FLUSHES_IN_FLIGHT.defaultValue();

    public int getEvery() {
      return every;
    }

    public void setEvery(int every) {
      this.every = every;
    }

    public Duration getMaxDelay() {
      return maxDelay;
    }

    public void setMaxDelay(Duration maxDelay) {
      this.maxDelay = maxDelay;
    }

    public Duration getHeartbeat() {
      return heartbeat;
    }

    public void setHeartbeat(Duration heartbeat) {
      this.heartbeat = heartbeat;
    }

    public int getFlushesInFlight() {
      return flushesInFlight;
    }

    public void setFlushesInFlight(int flushesInFlight) {
      this.flushesInFlight = flushesInFlight;
    }
  }

  /** Retries of a change whose handler failed: exponential back-off with jitter. */
  public static class Retry {
    /** Attempts per change before on-failure applies. */
    private int attempts = ListenerSettings.RETRY_ATTEMPTS.defaultValue();

    /** The delay after the first failure; doubles per attempt. */
    private Duration initialDelay = ListenerSettings.RETRY_INITIAL_DELAY.defaultValue();

    /** The longest delay. */
    private Duration maxDelay = ListenerSettings.RETRY_MAX_DELAY.defaultValue();

    public int getAttempts() {
      return attempts;
    }

    public void setAttempts(int attempts) {
      this.attempts = attempts;
    }

    public Duration getInitialDelay() {
      return initialDelay;
    }

    public void setInitialDelay(Duration initialDelay) {
      this.initialDelay = initialDelay;
    }

    public Duration getMaxDelay() {
      return maxDelay;
    }

    public void setMaxDelay(Duration maxDelay) {
      this.maxDelay = maxDelay;
    }
  }

  // ---------------------------------------------------------------------------------------------

  @Override
  public boolean supports(Class<?> type) {
    return SluiceProperties.class.isAssignableFrom(type);
  }

  /**
   * Checks what can be checked without the application's beans; each message names the full
   * property ({@code sluice.listeners.orders.partitions}). The Sluice builders check the
   * combinations when the beans are built ({@link ListenerFactory}).
   */
  @Override
  public void validate(Object target, Errors errors) {
    SluiceProperties p = (SluiceProperties) target;
    if (p.owner != null && (p.owner.isBlank() || p.owner.contains("/") || p.owner.length() > 100)) {
      reject(errors, "owner", "sluice.owner", p.owner, "must be 1..100 characters without '/'");
    }
    positive(errors, "store.mongodb.operationTimeout", "sluice.store.mongodb.operation-timeout",
        p.store.mongodb.operationTimeout);
    positive(errors, "lock.leaseDuration", "sluice.lock.lease-duration", p.lock.leaseDuration);
    if (p.lock.extendEvery != null) {
      positive(errors, "lock.extendEvery", "sluice.lock.extend-every", p.lock.extendEvery);
    }
    positive(errors, "health.lagThreshold", "sluice.health.lag-threshold", p.health.lagThreshold);
    positive(errors, "health.timeout", "sluice.health.timeout", p.health.timeout);
    p.listeners.forEach((name, l) -> validateListener(errors, name, l));
  }

  /** Each value of a listener entry checked by its {@link ListenerSettings} rule, in the rule's words. */
  private static void validateListener(Errors errors, String name, ListenerProperties l) {
    check(errors, name, ListenerSettings.GROUP, l.group);
    check(errors, name, ListenerSettings.PARTITIONS, l.partitions);
    check(errors, name, ListenerSettings.THREADS, l.threads);
    check(errors, name, ListenerSettings.CONCURRENCY, l.concurrency);
    check(errors, name, ListenerSettings.LEASE_DURATION, l.leaseDuration);
    check(errors, name, ListenerSettings.RENEW_INTERVAL, l.renewInterval);
    check(errors, name, ListenerSettings.ACQUIRE_INTERVAL, l.acquireInterval);
    check(errors, name, ListenerSettings.POLL_WAIT, l.pollWait);
    check(errors, name, ListenerSettings.CHECKPOINT_EVERY, l.checkpoint.every);
    check(errors, name, ListenerSettings.CHECKPOINT_MAX_DELAY, l.checkpoint.maxDelay);
    check(errors, name, ListenerSettings.CHECKPOINT_HEARTBEAT, l.checkpoint.heartbeat);
    check(errors, name, ListenerSettings.CHECKPOINT_FLUSHES_IN_FLIGHT, l.checkpoint.flushesInFlight);
    check(errors, name, ListenerSettings.RETRY_ATTEMPTS, l.retry.attempts);
    check(errors, name, ListenerSettings.RETRY_INITIAL_DELAY, l.retry.initialDelay);
    check(errors, name, ListenerSettings.RETRY_MAX_DELAY, l.retry.maxDelay);
    check(errors, name, ListenerSettings.BOOTSTRAP, l.bootstrap);
  }

  /**
   * Rejects {@code value} of {@code setting} in listener {@code name} if its rule refuses it, naming
   * the property as written ({@code sluice.listeners.orders.lease-duration}).
   */
  private static <T> void check(Errors errors, String name, Setting<T> setting, T value) {
    String problem = setting.problem(value);
    if (problem != null) {
      errors.rejectValue("listeners[" + name + "]." + setting.name(), "sluice.invalid",
          "sluice.listeners." + name + "." + kebab(setting.name()) + " " + problem);
    }
  }

  /** {@code checkpoint.flushesInFlight} as Spring's relaxed binding writes it: {@code checkpoint.flushes-in-flight}. */
  static String kebab(String name) {
    return name.replaceAll("([A-Z])", "-$1").toLowerCase(Locale.ROOT);
  }

  private static void positive(Errors errors, String field, String property, Duration value) {
    if (value == null || value.isNegative() || value.isZero()) {
      reject(errors, field, property, value, "must be positive");
    }
  }

  private static void reject(Errors errors, String field, String property, Object value, String rule) {
    errors.rejectValue(field, "sluice.invalid", property + " " + rule + ", but was " + value);
  }
}
