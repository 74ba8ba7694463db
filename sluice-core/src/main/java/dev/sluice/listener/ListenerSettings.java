package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;

/**
 * The catalogue of a listener's settings: each one's name, type, default, rule and documentation,
 * written once. {@link Listener.Builder}, {@link CheckpointPolicy#defaults()} and {@link
 * RetryPolicy#defaults()} are where the defaults come from; the front-ends (the service's YAML file,
 * the Spring Boot starter's {@code sluice.listeners.*} properties, the Kafka Connect connector's
 * keys) translate into these and take defaults, rules and wording from here, so a new setting is
 * added once (ADR 0116).
 *
 * <p>The rules here are what a value alone must satisfy; the combinations ({@code renewInterval} at
 * most a third of {@code leaseDuration}, {@code concurrency} above 1 only for a handler that allows
 * it, a bootstrap the feed supports) are checked by {@link ListenerConfig} when the listener is built.
 * The policy records ({@link CheckpointPolicy}, {@link RetryPolicy}) check their parts again when
 * constructed.
 */
public final class ListenerSettings {
  private ListenerSettings() {}

  private static final String RANGE_PARTITIONS = "must be in [1, " + ListenerConfig.MAX_PARTITIONS + "]";

  /** The consumer group; required by the API, derived by the front-ends when not given. */
  public static final Setting<String> GROUP = new Setting<>("group", String.class, null, ListenerConfig::validGroup,
      ListenerConfig.GROUP_RULE, "Consumer group: one logical consumer of the stream; members of one group share"
          + " its partitions, every group gets every change. " + ListenerConfig.GROUP_RULE.replace("must be ", "")
          + ".");

  /** How many partitions the stream is split into. */
  public static final Setting<Integer> PARTITIONS = new Setting<>("partitions", Integer.class, 1,
      n -> n >= 1 && n <= ListenerConfig.MAX_PARTITIONS, RANGE_PARTITIONS,
      "Partitions, by a hash of the key; every member of a group must use the same count. Default 1.");

  /** Threads that run the listener's partitions in this process. */
  public static final Setting<Integer> THREADS = new Setting<>("threads", Integer.class, null,
      n -> n >= 1 && n <= ListenerConfig.MAX_PARTITIONS, RANGE_PARTITIONS,
      "Threads that run this listener's partitions in this process. Default: one per partition, at most "
          + ListenerConfig.DEFAULT_MAX_THREADS + " on a feed whose cursors wait without a thread.");

  /** Changes of one partition handled at once. */
  public static final Setting<Integer> CONCURRENCY = new Setting<>("concurrency", Integer.class, 1,
      n -> n >= 1 && n <= ListenerConfig.MAX_CONCURRENCY, "must be in [1, " + ListenerConfig.MAX_CONCURRENCY + "]",
      "Changes of one partition handled at once (never two of one key); above 1 the handler must be"
          + " thread-safe, and Sluice's sinks refuse it (they overlap their sends themselves). Default 1.");

  /** How long a partition stays owned without renewal. */
  public static final Setting<Duration> LEASE_DURATION = new Setting<>("leaseDuration", Duration.class,
      Duration.ofSeconds(10), d -> d.compareTo(ListenerConfig.MIN_LEASE) >= 0,
      "must be at least " + text(ListenerConfig.MIN_LEASE),
      "How long a partition stays owned without renewal: the failover time after a crash (at least "
          + text(ListenerConfig.MIN_LEASE) + "). Default 10s.");

  /** How often a held lease is renewed. */
  public static final Setting<Duration> RENEW_INTERVAL = positive("renewInterval",
      "How often a held lease is renewed; at most a third of leaseDuration. Default: a third of leaseDuration.");

  /** How often an instance without the lease tries to take it. */
  public static final Setting<Duration> ACQUIRE_INTERVAL = positive("acquireInterval",
      "How often an instance without the lease tries to take it. Default: the renew interval.");

  /** Longest wait of one poll of the feed. */
  public static final Setting<Duration> POLL_WAIT = positive("pollWait",
      "Longest wait of one poll of the feed; at most the renew interval. Default 200ms, or the renew interval"
          + " if shorter.");

  /** Commit after this many changes. */
  public static final Setting<Integer> CHECKPOINT_EVERY = new Setting<>("checkpoint.every", Integer.class,
      CheckpointPolicy.defaults().maxChanges(), n -> n >= 1, "must be >= 1",
      "Commit the position after this many changes ... Default " + CheckpointPolicy.defaults().maxChanges() + ".");

  /** ... or after this long. */
  public static final Setting<Duration> CHECKPOINT_MAX_DELAY = new Setting<>("checkpoint.maxDelay", Duration.class,
      CheckpointPolicy.defaults().maxDelay(), d -> !d.isNegative(), "must not be negative",
      "... or after this long, whichever comes first. Default " + text(CheckpointPolicy.defaults().maxDelay()) + ".");

  /** Progress without changes is committed this often. */
  public static final Setting<Duration> CHECKPOINT_HEARTBEAT = new Setting<>("checkpoint.heartbeat", Duration.class,
      CheckpointPolicy.DEFAULT_HEARTBEAT, d -> !d.isNegative() && !d.isZero(), "must be positive",
      "A partition whose position moves without changes for it (idle or filtered) commits that progress this"
          + " often. Default " + text(CheckpointPolicy.DEFAULT_HEARTBEAT) + ".");

  /** Flushes pending while the next changes are handled. */
  public static final Setting<Integer> CHECKPOINT_FLUSHES_IN_FLIGHT = new Setting<>("checkpoint.flushesInFlight",
      Integer.class, CheckpointPolicy.DEFAULT_FLUSHES_IN_FLIGHT,
      n -> n >= 0 && n <= CheckpointPolicy.MAX_FLUSHES_IN_FLIGHT,
      "must be 0 (each checkpoint waits for its flush) to " + CheckpointPolicy.MAX_FLUSHES_IN_FLIGHT,
      "Flushes pending while the next changes are handled; a crash delivers again at most (this + 1) x every"
          + " changes. Default " + CheckpointPolicy.DEFAULT_FLUSHES_IN_FLIGHT + ".");

  private static final List<String> BOOTSTRAPS = List.of("oldest", "latest", "snapshot");

  /** Where a partition without a checkpoint starts. */
  public static final Setting<String> BOOTSTRAP = new Setting<>("bootstrap", String.class, "oldest",
      ListenerSettings::isBootstrap,
      "must be oldest, latest, snapshot or an ISO-8601 instant such as 2026-01-01T00:00:00Z",
      "Where a partition without a checkpoint starts: oldest, latest, snapshot, or an ISO-8601 instant such as"
          + " 2026-01-01T00:00:00Z. Default oldest.");

  private static final List<String> HISTORY_LOST = List.of("stop", "skip-to-latest", "resnapshot");

  /** What happens when the checkpoint fell off the source's retained history. */
  public static final Setting<String> ON_HISTORY_LOST = new Setting<>("onHistoryLost", String.class, "stop",
      v -> HISTORY_LOST.contains(lower(v)), "must be stop, skip-to-latest or resnapshot",
      "The checkpoint fell off the source's history: stop loudly, skip to the newest change, or read every"
          + " row or document again. Default stop.");

  /** What happens to a change once its retries are used up. */
  public static final Setting<String> ON_FAILURE = new Setting<>("onFailure", String.class, "block",
      v -> List.of("block", "park").contains(lower(v)), "must be block or park",
      "Once the retries are used up: block the partition, or park the change (and later changes of its key)"
          + " and go on. Default block.");

  /** Attempts per change before {@link #ON_FAILURE} applies. */
  public static final Setting<Integer> RETRY_ATTEMPTS = new Setting<>("retry.attempts", Integer.class,
      RetryPolicy.defaults().maxAttempts(), n -> n >= 1, "must be >= 1",
      "Attempts per change before onFailure applies. Default " + RetryPolicy.defaults().maxAttempts() + ".");

  /** The delay after the first failure. */
  public static final Setting<Duration> RETRY_INITIAL_DELAY = new Setting<>("retry.initialDelay", Duration.class,
      RetryPolicy.defaults().initialDelay(), d -> !d.isNegative(), "must not be negative",
      "The delay after the first failure; doubles per attempt. Default "
          + text(RetryPolicy.defaults().initialDelay()) + ".");

  /** The longest delay between attempts. */
  public static final Setting<Duration> RETRY_MAX_DELAY = new Setting<>("retry.maxDelay", Duration.class,
      RetryPolicy.defaults().maxDelay(), d -> !d.isNegative(), "must not be negative",
      "The longest delay between attempts (at least initialDelay). Default "
          + text(RetryPolicy.defaults().maxDelay()) + ".");

  /** Every setting, in the order of the documentation. */
  public static List<Setting<?>> all() {
    return List.of(GROUP, PARTITIONS, THREADS, CONCURRENCY, LEASE_DURATION, RENEW_INTERVAL, ACQUIRE_INTERVAL,
        POLL_WAIT, CHECKPOINT_EVERY, CHECKPOINT_MAX_DELAY, CHECKPOINT_HEARTBEAT, CHECKPOINT_FLUSHES_IN_FLIGHT,
        BOOTSTRAP, ON_HISTORY_LOST, ON_FAILURE, RETRY_ATTEMPTS, RETRY_INITIAL_DELAY, RETRY_MAX_DELAY);
  }

  /**
   * The policy {@code value} of {@link #BOOTSTRAP} names (the default when null).
   *
   * @throws ConfigurationException naming {@code path} and {@link #BOOTSTRAP}'s rule
   */
  public static BootstrapPolicy bootstrap(String value, String path) {
    String v = lower(BOOTSTRAP.check(value, path));
    return switch (v) {
      case "oldest" -> BootstrapPolicy.oldest();
      case "latest" -> BootstrapPolicy.latest();
      case "snapshot" -> BootstrapPolicy.snapshot();
      default -> BootstrapPolicy.at(Instant.parse(value.trim()));
    };
  }

  /** The policy {@code value} of {@link #ON_HISTORY_LOST} names (the default when null). */
  public static HistoryLostPolicy historyLost(String value, String path) {
    return HistoryLostPolicy.valueOf(
        lower(ON_HISTORY_LOST.check(value, path)).replace('-', '_').toUpperCase(Locale.ROOT));
  }

  /** Whether {@code value} of {@link #ON_FAILURE} parks (the default, when null, blocks). */
  public static boolean parks(String value, String path) {
    return lower(ON_FAILURE.check(value, path)).equals("park");
  }

  private static boolean isBootstrap(String value) {
    if (BOOTSTRAPS.contains(lower(value))) {
      return true;
    }
    try {
      Instant.parse(value.trim());
      return true;
    } catch (DateTimeParseException e) {
      return false;
    }
  }

  private static Setting<Duration> positive(String name, String doc) {
    return new Setting<>(name, Duration.class, null, d -> !d.isNegative() && !d.isZero(), "must be positive", doc);
  }

  private static String lower(String s) {
    return s.trim().toLowerCase(Locale.ROOT);
  }

  /** {@code 10s}, {@code 100ms}: how the front-ends write durations. */
  private static String text(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + "s" : d.toMillis() + "ms";
  }
}
