package dev.sluice.app.service;

import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.ConfigurationException;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.sink.MessageEncoder;
import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds feeds, stores, sinks and listeners from a validated {@link SluiceConfig}, the same way for
 * every {@link Source} (MongoDB or PostgreSQL).
 *
 * @param <D> the source's document type
 */
public final class Wiring<D> implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Wiring.class);
  public static final String DEFAULT_DEAD_LETTERS = dev.sluice.mongodb.source.MongoBackend.DEFAULT_DEAD_LETTERS;

  private final SluiceConfig config;
  private final Source<D> source;

  private Wiring(SluiceConfig config, Source<D> source) {
    this.config = config;
    this.source = source;
  }

  /**
   * The wiring of {@code config}, connected to its source (the caller closes it).
   *
   * @param service for {@code sluice run} (a MongoDB client with a socket read timeout) rather than
   *     a command
   */
  public static Wiring<?> connect(SluiceConfig config, boolean service) {
    return of(config, Source.of(config, service));
  }

  private static <D> Wiring<D> of(SluiceConfig config, Source<D> source) {
    return new Wiring<>(config, source);
  }

  /** The source this wiring is connected to. */
  Source<D> source() {
    return source;
  }

  /** The server's name in messages: {@code MongoDB} or {@code PostgreSQL}. */
  public String sourceName() {
    return source.name();
  }

  /** What an entry relays: {@code collection} or {@code table}. */
  public String targetKind() {
    return source.targetKind();
  }

  /** The entry's collection or table with its database, for log lines. */
  public String describe(ListenerSection l) {
    return source.describe(l);
  }

  /** Null when the source's server answers a bounded request, else the problem naming it. */
  public String sourceProblem() {
    return source.problem();
  }

  /**
   * The lease store, one for the process (thread-safe; every listener and status call shares it):
   * a store may hold something until closed (the SQL store's liveness session, ADR 0114), and
   * {@link #close()} closes it before the source, so its connection is back in the pool first.
   */
  public LeaseStore leaseStore() {
    return leaseStores.computeIfAbsent("unbounded", k -> source.leaseStore(null));
  }

  /** The lease stores handed out, by bound. */
  private final java.util.Map<String, LeaseStore> leaseStores = new java.util.concurrent.ConcurrentHashMap<>();

  /** The lease store, each call bounded by {@code timeout}. */
  public LeaseStore leaseStore(java.time.Duration timeout) {
    return timeout == null ? leaseStore()
        : leaseStores.computeIfAbsent(timeout.toString(), k -> source.leaseStore(timeout));
  }

  public DeadLetterStore<D> deadLetters() {
    return source.deadLetters(null);
  }

  /** The dead-letter store, each call bounded by {@code timeout}. */
  public DeadLetterStore<D> deadLetters(java.time.Duration timeout) {
    return source.deadLetters(timeout);
  }

  /** How many changes of {@code scope} {@code store} (one of this wiring's) holds. */
  public long parked(DeadLetterStore<D> store, String scope) {
    return source.parked(store, scope);
  }

  public ChangeFeed<D> feed(ListenerSection l) {
    return source.feed(l, at(l));
  }

  private String at(ListenerSection l) {
    return "listeners[" + config.listeners().indexOf(l) + "]";
  }

  /**
   * The listener section for {@code target} (a collection, or with PostgreSQL a table; null: the
   * only entry of {@code group}) and {@code group} (null: the only entry of {@code target}), or a
   * clear error listing the configured ones.
   */
  public ListenerSection section(String target, String group) {
    if (target == null && group == null) {
      throw new IllegalArgumentException("a target, a group or both");
    }
    String kind = source.targetKind();
    List<ListenerSection> matches = new java.util.ArrayList<>();
    List<String> configured = new java.util.ArrayList<>();
    for (int i = 0; i < config.listeners().size(); i++) {
      ListenerSection l = config.listeners().get(i);
      String g = ConfigLoader.group(l, "listeners[" + i + "]");
      configured.add(l.target() + " (group " + g + ")");
      if ((target == null || l.target().equals(target)) && (group == null || group.equals(g))) {
        matches.add(l);
      }
    }
    if (matches.size() == 1) {
      return matches.get(0);
    }
    String wanted = (target == null ? "" : kind + " '" + target + "'") + (target != null && group != null ? " and " : "")
        + (group == null ? "" : "group '" + group + "'");
    throw new ConfigurationException(matches.isEmpty()
        ? "No listener for " + wanted + " in the configuration; configured: " + configured
        : target == null ? "Group '" + group + "' reads several: name one with --" + kind + "; configured: " + configured
        : "Several listeners read " + kind + " '" + target + "': name one with --group; configured: "
            + configured);
  }

  /** The scope of {@code l}'s dead letters, {@code group/stream} (ListenerConfig.deadLetterScope). */
  public String deadLetterScope(ListenerSection l) {
    return ConfigLoader.group(l, at(l)) + "/" + feed(l).stream();
  }

  /** The sink of a listener section; the caller closes it. */
  public SinkHandle<D> sink(ListenerSection l, String topicOrExchangeOverride) {
    MessageEncoder.Builder<D> encoder = MessageEncoder.builder(source.mapper());
    String at = at(l);
    encoder.publication(ConfigLoader.publication(l, at));
    if (l.sink().kafka() != null) {
      requireResolvable(l.sink().kafka().bootstrapServers(), at + ".sink.kafka.bootstrapServers");
      String topic = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().kafka().topic();
      KafkaSink<D> sink = KafkaSink.builder(l.sink().kafka().bootstrapServers(), topic, encoder.build()).build();
      SinkReach reach = SinkReach.kafka(l.sink().kafka().bootstrapServers());
      return new SinkHandle<>(sink, () -> {
        reach.close();
        sink.close();
      }, "kafka topic " + topic, reach);
    }
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(l.sink().amqp().uri());
    } catch (Exception e) {
      throw new ConfigurationException(at(l) + ".sink.amqp.uri '"
          + dev.sluice.app.cli.Secrets.mask(l.sink().amqp().uri()) + "' is not a valid AMQP URI: " + dev.sluice.app.cli.Secrets.mask(e.getMessage()));
    }
    requireResolvable(factory.getHost(), at + ".sink.amqp.uri",
        dev.sluice.app.cli.Secrets.mask(l.sink().amqp().uri()));
    String exchange = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().amqp().exchange();
    AmqpSink<D> sink = AmqpSink.builder(factory, exchange, encoder.build()).build();
    return new SinkHandle<>(sink, sink::close, "AMQP exchange " + exchange, SinkReach.amqp(factory));
  }

  /**
   * Refuses Kafka bootstrap servers none of which resolves (the producer could never be built:
   * it would fail with "Failed to construct kafka producer" at every attempt), with Kafka's own
   * resolution of {@code bootstrap.servers}. A broker that resolves but is down is waited for.
   */
  private static void requireResolvable(String bootstrapServers, String setting) {
    try {
      org.apache.kafka.clients.ClientUtils.parseAndValidateAddresses(
          java.util.Arrays.stream(bootstrapServers.split(",")).map(String::trim).toList(),
          org.apache.kafka.clients.ClientDnsLookup.USE_ALL_DNS_IPS);
    } catch (org.apache.kafka.common.KafkaException e) {
      throw new ConfigurationException(setting + " '" + bootstrapServers + "': no host of it resolves ("
          + e.getMessage() + "); name a host this machine can resolve");
    }
  }

  /** Refuses an AMQP URI whose host does not resolve: the connection could never be opened. */
  private static void requireResolvable(String host, String setting, String maskedUri) {
    try {
      java.net.InetAddress.getAllByName(host);
    } catch (java.net.UnknownHostException e) {
      throw new ConfigurationException(setting + " '" + maskedUri + "': host '" + host + "' does not resolve ("
          + e.getMessage() + "); name a host this machine can resolve");
    }
  }

  /** A listener relaying one collection or table to its sink. */
  public Listener<D> listener(ListenerSection l, Handler<D> handler, ListenerObserver observer) {
    String at = at(l);
    FailurePolicy failure = ConfigLoader.parks(l, at)
        ? FailurePolicy.park(ConfigLoader.retry(l, at), deadLetters())
        : FailurePolicy.block(ConfigLoader.retry(l, at));
    Listener.Builder<D> builder = Listener.builder(feed(l), leaseStore()).group(ConfigLoader.group(l, at));
    if (l.threads() != null) {
      builder.threads(l.threads());
    }
    // Not set: the listener derives them from the lease (ListenerSettings says how).
    java.util.Optional.ofNullable(ConfigLoader.renewInterval(l, at)).ifPresent(builder::renewInterval);
    java.util.Optional.ofNullable(ConfigLoader.acquireInterval(l, at)).ifPresent(builder::acquireInterval);
    java.util.Optional.ofNullable(ConfigLoader.pollWait(l, at)).ifPresent(builder::pollWait);
    return builder
        .handler(handler)
        .partitions(ConfigLoader.partitions(l, at))
        .concurrency(ConfigLoader.concurrency(l, at))
        .leaseDuration(ConfigLoader.leaseDuration(l, at))
        .checkpoint(ConfigLoader.checkpoint(l, at))
        .bootstrap(ConfigLoader.bootstrap(l, at))
        .onHistoryLost(ConfigLoader.historyLost(l, at))
        .onFailure(failure)
        .observer(observer)
        .build();
  }

  /**
   * Lease records of {@code l}'s collection written before consumer groups existed (named
   * {@code <stream>#<partition>}, docs/upgrading.md) that carry a checkpoint. A listener never
   * adopts them: it starts per its bootstrap policy.
   */
  public List<LeaseRecord> legacyCheckpoints(ListenerSection l) {
    String stream = feed(l).stream();
    return leaseStore().list(stream + "#").stream()
        .filter(r -> r.name().substring(stream.length() + 1).matches("[0-9]+"))
        .filter(r -> r.checkpoint() != null)
        .toList();
  }

  /**
   * Refuses to start {@code l} while legacy checkpoints of its collection exist, unless the entry
   * says {@code legacyCheckpoints: ignore}: starting silently per the bootstrap policy would skip
   * or repeat what the old records had reached.
   */
  /** What reading entry {@code l} needs of the server, before anything is created (see Source). */
  public void checkReadable(ListenerSection l) {
    source.checkReadable(l, at(l));
  }

  public void checkLegacyCheckpoints(ListenerSection l) {
    List<LeaseRecord> legacy = legacyCheckpoints(l);
    long legacyDeadLetters = ConfigLoader.parks(l, at(l))
        ? parked(deadLetters(), feed(l).stream()) : 0;
    if (legacy.isEmpty() && legacyDeadLetters == 0) {
      return;
    }
    String at = at(l);
    String names = legacy.stream().map(r -> r.name() + " at " + r.checkpoint()).toList()
        + (legacyDeadLetters == 0 ? "" : " and " + legacyDeadLetters + " dead letter(s) parked under '"
            + feed(l).stream() + "' (not blocking their keys any more)");
    if (ConfigLoader.ignoreLegacyCheckpoints(l)) {
      log.warn("{}: ignoring checkpoints written before consumer groups {}; group '{}' starts per its"
          + " bootstrap policy", at, names, ConfigLoader.group(l, at));
      return;
    }
    throw new ConfigurationException(at + " (" + source.targetKind() + " '" + l.target() + "'): the store holds"
        + " records written before consumer groups existed: " + names + ". Consumer group '"
        + ConfigLoader.group(l, at) + "' does not adopt them and would start per its bootstrap policy."
        + " Set legacyCheckpoints: ignore on this entry to start anyway, or carry the position over"
        + " as docs/upgrading.md describes");
  }

  /** A sink with its close action, a description for messages and its broker's reachability. */
  public record SinkHandle<D>(Handler<D> handler, AutoCloseable closer, String description, SinkReach reach)
      implements AutoCloseable {
    @Override
    public void close() {
      try {
        closer.close();
      } catch (Exception e) {
        throw new IllegalStateException("Closing " + description + " failed", e);
      }
    }
  }

  /**
   * How long {@link #close()} waits for the source's clients to close. A client's close can wait on
   * a server that keeps its connections open and never answers: the MongoDB driver ends its server
   * sessions ({@code endSessions}) and waits for the socket read timeout, not {@code timeoutMS} (38 s
   * measured with the service's 30 s read timeout); HikariCP waits for a connection being opened up
   * to its login timeout (5 s for the service's pool) before it closes the others.
   */
  static final Duration CLOSE_BOUND = Duration.ofSeconds(3);

  /**
   * Closes the connections to the source, waiting at most {@link #CLOSE_BOUND} (docs/adr/0103): past
   * it the close goes on on a daemon thread, which ends once the client's own bound passes and never
   * keeps the process alive.
   */
  @Override
  public void close() {
    for (LeaseStore store : leaseStores.values()) {
      if (store instanceof AutoCloseable closeable) {
        try {
          closeable.close();
        } catch (Exception e) {
          log.warn("Closing the lease store failed: {}", e.toString());
        }
      }
    }
    leaseStores.clear();
    if (!BoundedClose.run(CLOSE_BOUND, java.util.Map.of("sluice-close-" + source.name(), source::close)).isEmpty()) {
      log.warn("The {} client did not close within {} (the server does not answer?); left to close on a daemon"
          + " thread", source.name(), CLOSE_BOUND);
    }
  }

  /** Registers the source's own meters (if it has any) for a started listener. */
  /** Each partition's slot and the WAL it keeps (PostgreSQL), or null ({@link Source#slots}). */
  @SuppressWarnings("unchecked")
  public List<java.util.Map<String, Object>> slots(Listener<?> listener, List<LeaseRecord> records) {
    return source.slots((Listener<D>) listener, records);
  }

  public void bindSourceMeters(io.micrometer.core.instrument.MeterRegistry registry, Listener<D> listener) {
    source.bindMeters(registry, listener);
  }

  /** Publishes every document or row of entry {@code l} as it is now ({@link Source#replayCurrentState}). */
  public dev.sluice.sink.Replay.Result replayCurrentState(ListenerSection l, String replayId, dev.sluice.listener.Handler<D> handler) {
    return source.replayCurrentState(l, at(l), replayId, handler);
  }
}
