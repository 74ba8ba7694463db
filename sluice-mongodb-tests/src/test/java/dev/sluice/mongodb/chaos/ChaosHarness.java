package dev.sluice.mongodb.chaos;

import com.mongodb.ConnectionString;
import com.mongodb.ServerAddress;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Projections;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.OwnerId;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.process.ChildJvm;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionTimeoutException;
import org.bson.Document;

/**
 * A multi-process chaos run: listener JVMs ({@link ChaosNode}) of one group share {@value
 * #PARTITIONS} partitions of a collection that {@link ChaosWriter} fills with per-key sequence
 * numbers, while rounds chosen by a seeded {@link Random} SIGKILL a member, SIGSTOP one past its
 * lease and resume it, add one, or cut one off from the lease store, the source or the sink. The
 * ground truth the members write through fenced writes is checked at the end, after the writer
 * stopped and every member caught up.
 *
 * <h2>Network</h2>
 * Each member reaches the server through three {@link FaultProxy}s of its own, opened here in the
 * harness JVM, one per {@link Role}: its lease store client, its change-stream client and its sink
 * client (the ground-truth writes), each with {@code directConnection=true} so that the driver
 * cannot discover a replica set's members and go round the proxy (docs/adr/0108). With {@link
 * Settings#noise()}, every proxy has latency episodes (each chunk delayed by up to half the renew
 * interval each way) and random connection resets from the start until every written change is
 * applied; the final balance is then awaited without them (docs/adr/0109).
 *
 * <h2>Rounds</h2>
 * Each round picks, from the seed (a shuffled bag of the kinds, so that every three rounds, or six
 * with {@link Settings#networkFaults()}, see each once), one of: <b>kill</b> a random live member ({@link
 * Process#destroyForcibly}, SIGKILL), then start a replacement if fewer than {@code minMembers}
 * are left; <b>pause</b> a random member with SIGSTOP until the store shows none of its leases
 * held any more (its partitions and its membership expired on the database's clock, so the pause
 * is provably past the lease), then SIGCONT; <b>add</b> a member (only below {@code maxMembers});
 * <b>partition</b> a member that holds a partition from the lease store, the source or the sink:
 * its proxy of that role blackholes for one to two leases, and the round lasts until it healed.
 * A round ends when every key has applied a change written after the disruption began: every
 * partition is owned and moving again. No round waits for a fixed time.
 *
 * <h2>Ground truth and the applied log</h2>
 * Each key has one document in {@value #TRUTH}, written only by {@link ChaosNode}'s handler with
 * {@code FencedWrites.updateOne} under the fence (lease, epoch) of the change being handled. That
 * single fenced update also appends {@code {seq, epoch, node, time}} to the document's {@code log}
 * array, so the log holds exactly the <em>accepted</em> writes (those the fence let through; a
 * rejected one throws and appends nothing) in <em>acceptance order</em>, the order in which the
 * database applied them. A separate applied-log collection cannot give that order: its insert is
 * a second write after the fenced one, and a member paused between the two appends its entry
 * after writes the new owner made later; without transactions (the embedded server has none)
 * only the fenced document itself orders the accepted writes.
 *
 * <h2>Checks</h2>
 * <ul>
 *   <li><b>Nothing lost</b>: every seq 1..n written for a key appears in its log.
 *   <li><b>No per-key order violation among accepted writes</b>: at-least-once means a new owner
 *       replays from the last checkpoint, so a key's log may go back (a <em>replay</em>: a write of
 *       a seq already accepted before, counted as a duplicate). Dropping the replays, each key's
 *       accepted writes must be exactly 1, 2, 3, … in acceptance order, strictly increasing with
 *       no gap; a write of seq s accepted before s-1 was ever accepted is a violation (the engine
 *       delivered a key's changes out of order, or a stale owner's write got through). And the
 *       epochs of a key's accepted writes never decrease (a key is always in one partition, so
 *       they are epochs of one lease): a lower epoch accepted after a higher one is a fencing
 *       violation.
 *   <li><b>Bounded duplicates</b>: duplicates &le; checkpoint batch &times; (takeovers + feed
 *       re-opens + handler failures). A takeover (any acquisition of a partition after its first)
 *       replays at most what the previous owner handled since its last commit, at most one batch;
 *       a feed re-open inside a tenure and a retried handler call are the engine's other,
 *       documented, sources of redelivery, recorded by the members' observers.
 *   <li><b>No two owners at once</b> ({@link ChaosReport#overlaps}): on the ground truth, no older
 *       epoch of a partition handled a change after a newer one began, unless its owner was
 *       SIGSTOPped across the takeover (counted apart; fencing's case).
 *   <li><b>No handling past the local deadline</b> ({@link DeadlineWatch}, {@link
 *       ChaosReport#deadlines}): no member began a change at or after the local deadline of the
 *       lease it handled it under, unless stopped in between (counted apart); every change begun
 *       was checked.
 *   <li><b>Final balance</b>: with M live members, each holds floor(N/M) or ceil(N/M) partitions
 *       and every partition is held (read from the lease records, judged on the store's clock),
 *       awaited for a bounded time after the members caught up.
 * </ul>
 * Reported without a pass mark: the longest time a partition had no owner on the store's clock
 * ({@link Ownership}), the longest stall of any partition (the longest time between two
 * consecutive accepted writes of one partition, or from the first write to its first, while the
 * writer was writing) and, per join, the time from the new member's listener start to holding its
 * share floor(N/M).
 *
 * <p>Runs on the in-JVM MongoDB, reached by the member JVMs over TCP, or on a real deployment
 * given {@code -Dsluice.mongodb.uri=mongodb://...} (a fresh database per run).
 */
public final class ChaosHarness implements AutoCloseable {
  public static final String GROUP = "chaos";
  public static final int PARTITIONS = 4;
  public static final String SOURCE = "source";
  public static final String TRUTH = "truth";
  public static final String EVENTS = "events";
  /** Same property as the other MongoDB suites: run against a real server when set. */
  public static final String URI_PROPERTY = "sluice.mongodb.uri";

  /**
   * The longest, in lease durations, that a correct cluster may take to balance once the rounds
   * stop: the settling cap for a flapping member (10 lease durations, docs/adr/0008), two
   * refreshes confirming the excess, the hand-back and the acquisition.
   */
  public static final int BALANCE_LEASES = 12;

  /**
   * A run's parameters.
   *
   * @param seed seeds the choice of every round and victim
   * @param rounds number of disruption rounds
   * @param lease the members' lease duration (renewal a quarter of it)
   * @param checkpointBatch the members' checkpoint batch (changes; or 500 ms)
   * @param keys number of keys written, spread evenly over the partitions
   * @param writesPerSecond the writer's rate
   * @param minMembers a kill that leaves fewer live members starts a replacement
   * @param maxMembers no member is added at this many live members
   * @param roundTimeout the longest a round may take to recover before the run fails
   * @param joinWait how long an add round also waits for the new member to get its share (zero:
   *     measure it only while the next rounds run)
   * @param balanceWait how long the end waits for a balanced assignment; at least
   *     {@link #BALANCE_LEASES} lease durations
   * @param outputDir where each member's output is written at the end
   * @param budget no round starts once this much time has passed since the first one (the report
   *     shows the rounds actually run)
   * @param networkFaults whether rounds also partition a member from the lease store, the source
   *     or the sink (each round's choice is then among six kinds)
   * @param noise whether, until every written change is applied, every proxy has episodes of
   *     jittered latency (a request's round trip delayed by up to the renew interval) and random
   *     connection resets (the final balance is awaited without them)
   */
  public record Settings(long seed, int rounds, Duration lease, int checkpointBatch, int keys, int writesPerSecond,
      int minMembers, int maxMembers, Duration roundTimeout, Duration joinWait, Duration balanceWait,
      Path outputDir, Duration budget, boolean networkFaults, boolean noise) {
    public Settings {
      require(rounds >= 0, "rounds", rounds, "must be >= 0");
      require(lease != null && lease.toMillis() >= 500, "lease", lease, "must be at least 500 ms");
      require(checkpointBatch >= 1, "checkpointBatch", checkpointBatch, "must be >= 1");
      require(keys >= PARTITIONS && keys % PARTITIONS == 0, "keys", keys,
          "must be a positive multiple of the " + PARTITIONS + " partitions, so each partition gets the same number");
      require(writesPerSecond >= 1, "writesPerSecond", writesPerSecond, "must be >= 1");
      require(minMembers >= 1 && maxMembers > minMembers, "minMembers/maxMembers", minMembers + "/" + maxMembers,
          "need 1 <= minMembers < maxMembers");
      require(roundTimeout != null && !roundTimeout.isNegative() && !roundTimeout.isZero(), "roundTimeout",
          roundTimeout, "must be positive");
      require(joinWait != null && !joinWait.isNegative(), "joinWait", joinWait, "must not be negative");
      require(balanceWait != null && balanceWait.compareTo(lease.multipliedBy(BALANCE_LEASES)) >= 0, "balanceWait",
          balanceWait, "must be at least " + BALANCE_LEASES + " lease durations: a member that flapped waits up to 10"
              + " before its peers count it again (docs/adr/0008), then the excess is confirmed, handed back and taken");
      require(outputDir != null, "outputDir", null, "must be set");
      require(budget != null && !budget.isNegative() && !budget.isZero(), "budget", budget, "must be positive");
    }

    private static void require(boolean ok, String name, Object value, String why) {
      if (!ok) {
        throw new IllegalArgumentException("chaos setting " + name + " = " + value + ": " + why);
      }
    }

    /** Same settings with another seed. */
    public Settings withSeed(long s) {
      return new Settings(s, rounds, lease, checkpointBatch, keys, writesPerSecond, minMembers, maxMembers,
          roundTimeout, joinWait, balanceWait, outputDir, budget, networkFaults, noise);
    }

    /** The renew interval the members use: a quarter of the lease. */
    public Duration renewInterval() {
      return lease.dividedBy(4);
    }
  }

  /** A round's kind. */
  public enum Action {
    KILL, PAUSE, ADD, PARTITION_STORE, PARTITION_SOURCE, PARTITION_SINK;

    boolean network() {
      return this == PARTITION_STORE || this == PARTITION_SOURCE || this == PARTITION_SINK;
    }
  }

  /** A member's connection roles, each through a fault proxy of its own. */
  public enum Role { STORE, SOURCE, SINK }

  private static final class Member {
    final String name;
    final ChildJvm jvm;
    final Map<Role, FaultProxy> proxies;
    /** Per role, until when (System.nanoTime) a round's partition holds: the noise leaves it alone. */
    final Map<Role, Long> partitionedUntil = new java.util.EnumMap<>(Role.class);
    /** Wall-clock [SIGSTOP, SIGCONT] of each pause. */
    final List<long[]> pauses = new java.util.concurrent.CopyOnWriteArrayList<>();
    volatile boolean alive = true;
    long readyNanos;

    Member(String name, ChildJvm jvm, Map<Role, FaultProxy> proxies) {
      this.name = name;
      this.jvm = jvm;
      this.proxies = proxies;
    }

    synchronized boolean partitioned(Role role) {
      Long until = partitionedUntil.get(role);
      return until != null && System.nanoTime() - until < 0;
    }
  }

  /** A join whose share time is still being measured. */
  private static final class PendingJoin {
    final Member member;
    final int members;
    final int share;
    final long readyNanos;
    volatile Duration toShare;

    PendingJoin(Member member, int members, int share, long readyNanos) {
      this.member = member;
      this.members = members;
      this.share = share;
      this.readyNanos = readyNanos;
    }
  }

  private final Settings settings;
  private final PrintStream out;
  private final Random random;
  private final EmbeddedMongo embedded;
  private final String uri;
  private final MongoClient client;
  /** The writer's own client: on the embedded server with a long read timeout (see the constructor). */
  private final MongoClient writerClient;
  private final String databaseName;
  private final MongoDatabase db;
  private final LeaseStore leases;
  private final List<String> keys;
  private final Map<String, Integer> partitionOfKey = new HashMap<>();
  private final List<Member> members = new ArrayList<>();
  private final List<PendingJoin> pendingJoins = new ArrayList<>();
  private final List<ChaosReport.Join> joins = new ArrayList<>();
  private final ScheduledExecutorService monitor = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "chaos-monitor");
    t.setDaemon(true);
    return t;
  });
  private final ScheduledExecutorService noiseThread = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "chaos-noise");
    t.setDaemon(true);
    return t;
  });
  private final ChaosWriter writer;
  private final List<Action> bag = new ArrayList<>();
  /** Where the members' proxies forward to: the one server (or the primary) they connect to directly. */
  private final String serverHost;
  private final int serverPort;
  private final Random noiseRandom;
  private final Ownership ownership;
  private final Map<Action, Integer> roundsByKind = new java.util.EnumMap<>(Action.class);
  /** Per role: connections accepted and bytes forwarded by the proxies of members already closed. */
  private final Map<Role, long[]> closedTraffic = new java.util.EnumMap<>(Role.class);
  private final java.util.concurrent.atomic.AtomicInteger latencyEpisodes = new java.util.concurrent.atomic.AtomicInteger();
  private final java.util.concurrent.atomic.AtomicInteger resets = new java.util.concurrent.atomic.AtomicInteger();
  private int nextMember = 1;
  private int kills;
  private int pauses;
  private int joinCount;
  private int roundsRun;
  /** Wall-clock start of each round, to place the longest stall among the rounds. */
  private final TreeMap<Long, String> roundStarts = new TreeMap<>();

  /**
   * Starts the database side: the embedded server (or a client of {@code -Dsluice.mongodb.uri})
   * and a fresh database. Members start in {@link #run}.
   */
  public ChaosHarness(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
    this.random = new Random(settings.seed());
    String given = System.getProperty(URI_PROPERTY);
    if (given == null || given.isBlank()) {
      embedded = EmbeddedMongo.start();
      uri = embedded.connectionString();
      client = embedded.client();
    } else {
      embedded = null;
      uri = given;
      client = MongoClients.create(given);
    }
    databaseName = "chaos_" + Long.toUnsignedString(settings.seed(), 36) + "_"
        + Long.toString(System.currentTimeMillis(), 36);
    db = client.getDatabase(databaseName);
    leases = MongoLeaseStore.builder(db).build();
    keys = chooseKeys(settings.keys());
    for (String k : keys) {
      for (int p = 0; p < PARTITIONS; p++) {
        if (new PartitionSpec(p, PARTITIONS).owns(k)) {
          partitionOfKey.put(k, p);
        }
      }
    }
    // The embedded server does not deduplicate a write the driver retries after a read timeout
    // (docs/adr/0057), and the writer takes the duplicate-key refusal of such a retry as a failed
    // write: a soak on an overloaded machine (seed 20261128, round 208) stopped so. A read timeout
    // of 120 s instead of 10 s lets the first attempt answer; a real server deduplicates retries.
    writerClient = embedded == null ? client : MongoClients.create(embedded.clientSettings()
        .applyToSocketSettings(b -> b.readTimeout(120, TimeUnit.SECONDS)).build());
    writer = new ChaosWriter(writerClient.getDatabase(databaseName).getCollection(SOURCE), keys);
    ServerAddress server = directTarget();
    serverHost = server.getHost();
    serverPort = server.getPort();
    noiseRandom = new Random(settings.seed() * 31 + 7);
    ownership = new Ownership(PARTITIONS, settings.lease());
    for (Role r : Role.values()) {
      closedTraffic.put(r, new long[3]);
    }
  }

  /**
   * The one server the members' proxies forward to: the embedded server, or on a real deployment
   * its primary (asked with {@code hello}), since each member client connects through its proxy
   * with {@code directConnection=true} and must reach a server that takes writes and change
   * streams. A fault proxy forwards only to loopback addresses: a deployment elsewhere cannot run
   * this harness, and says so when the first proxy opens.
   */
  private ServerAddress directTarget() {
    if (embedded != null) {
      return new ConnectionString(uri).getHosts().stream().findFirst().map(ServerAddress::new)
          .orElseThrow(() -> new IllegalStateException("the embedded server's connection string names no host: " + uri));
    }
    Document hello = client.getDatabase("admin").runCommand(new Document("hello", 1));
    String primary = hello.getString("primary");
    if (primary == null) {
      primary = new ConnectionString(uri).getHosts().get(0);
    }
    return new ServerAddress(primary);
  }

  /** Keys {@code key-<i>} chosen so that each partition gets the same number of them. */
  static List<String> chooseKeys(int count) {
    int perPartition = count / PARTITIONS;
    int[] taken = new int[PARTITIONS];
    List<String> chosen = new ArrayList<>();
    for (int i = 0; chosen.size() < count; i++) {
      String k = "key-" + i;
      for (int p = 0; p < PARTITIONS; p++) {
        if (new PartitionSpec(p, PARTITIONS).owns(k) && taken[p] < perPartition) {
          taken[p]++;
          chosen.add(k);
        }
      }
    }
    return chosen;
  }

  private String leasePrefix() {
    return GROUP + "/" + databaseName + "." + SOURCE + "#";
  }

  private String memberPrefix() {
    return GROUP + "/" + databaseName + "." + SOURCE + "@member:";
  }

  /** Runs the members, the writer and the rounds, waits for the end state and analyses it. */
  public ChaosReport run() {
    long started = System.nanoTime();
    out.printf("chaos: seed %d, %d rounds, lease %s, checkpoint batch %d, %d keys, %d writes/s, database %s on %s,"
            + " members through fault proxies to %s:%d; network partitions %s, latency and resets %s%n",
        settings.seed(), settings.rounds(), settings.lease(), settings.checkpointBatch(), settings.keys(),
        settings.writesPerSecond(), databaseName, embedded != null ? "the embedded server" : uri, serverHost,
        serverPort, settings.networkFaults() ? "on" : "off", settings.noise() ? "on" : "off");
    try {
      List<Member> first = new ArrayList<>();
      for (int i = 0; i < settings.minMembers(); i++) {
        first.add(startMember());
      }
      first.forEach(this::awaitReady);
      awaitQuietly("every partition held by a live member", settings.roundTimeout(), this::allPartitionsHeld);
      monitor.scheduleWithFixedDelay(this::checkJoins, 100, 100, TimeUnit.MILLISECONDS);
      monitor.scheduleWithFixedDelay(this::sampleOwnership, 0, 100, TimeUnit.MILLISECONDS);
      if (settings.noise()) {
        noiseThread.scheduleWithFixedDelay(this::noise, 0, NOISE_TICK.toMillis(), TimeUnit.MILLISECONDS);
      }
      ownership.counting(true);
      writer.start(settings.writesPerSecond());
      Map<String, Long> none = new HashMap<>();
      keys.forEach(k -> none.put(k, 0L));
      awaitProgressBeyond(none, "the first changes");

      long roundsStarted = System.nanoTime();
      for (int round = 1; round <= settings.rounds(); round++) {
        if (System.nanoTime() - roundsStarted > settings.budget().toNanos()) {
          out.printf("chaos: time budget %s used up after %d of %d rounds%n", settings.budget(), roundsRun,
              settings.rounds());
          break;
        }
        runRound(round);
        roundsRun++;
      }

      writer.stop();
      ownership.counting(false);
      Map<String, Long> written = writer.written();
      out.printf("chaos: writer stopped after %,d changes; waiting for every member to catch up%n", writer.total());
      await("every written change applied", settings.roundTimeout(), () -> caughtUp(written));
      // The bound on balancing counts from the last disruption, and the noise is one: a reset of a
      // member's store connection during a latency episode can cost it its membership (2 s lease),
      // and each such flap holds its peers off counting it for longer (docs/adr/0008).
      quiet();
      boolean balanced = awaitQuietly("a balanced assignment", settings.balanceWait(), this::balanced);
      closePendingJoins();
      return analyse(written, balanced, Duration.ofNanos(System.nanoTime() - started));
    } finally {
      writeOutputs();
    }
  }

  private void runRound(int round) {
    writer.check();
    long t0 = System.nanoTime();
    Map<String, Long> before = writer.written();
    List<Member> alive = alive();
    Action action = nextAction(alive.size() < settings.maxMembers());
    roundsByKind.merge(action, 1, Integer::sum);
    closePendingJoins(); // a disruption ends the measurement of earlier joins
    roundStarts.put(System.currentTimeMillis(), "round " + round + " " + action);
    String detail;
    switch (action) {
      case KILL -> {
        Member victim = alive.get(random.nextInt(alive.size()));
        victim.jvm.kill();
        victim.alive = false;
        closeProxies(victim);
        kills++;
        detail = "SIGKILL " + victim.name;
        if (alive().size() < settings.minMembers()) {
          Member replacement = startMember();
          awaitReady(replacement);
          join(replacement);
          detail += ", replaced by " + replacement.name;
        }
      }
      case PAUSE -> {
        Member victim = alive.get(random.nextInt(alive.size()));
        long stoppedAt = System.nanoTime();
        long stoppedWall = System.currentTimeMillis();
        victim.jvm.pause();
        pauses++;
        try {
          await(victim.name + "'s leases all expired while it is stopped", settings.roundTimeout(),
              () -> holdsNothing(victim.name));
        } finally {
          victim.jvm.resume();
          victim.pauses.add(new long[] {stoppedWall, System.currentTimeMillis()});
        }
        detail = "SIGSTOP " + victim.name + " for " + millis(System.nanoTime() - stoppedAt) + " ms, SIGCONT";
      }
      case ADD -> {
        Member added = startMember();
        awaitReady(added);
        PendingJoin j = join(added);
        detail = "add " + added.name;
        if (!settings.joinWait().isZero() && j.share > 0) {
          awaitQuietly(added.name + " holding its share", settings.joinWait(), () -> j.toShare != null);
        }
      }
      case PARTITION_STORE, PARTITION_SOURCE, PARTITION_SINK -> {
        Role role = action == Action.PARTITION_STORE ? Role.STORE
            : action == Action.PARTITION_SOURCE ? Role.SOURCE : Role.SINK;
        Member victim = aHolder(alive);
        Duration bound = Duration.ofMillis(settings.lease().toMillis()
            + (long) (random.nextDouble() * settings.lease().toMillis())); // one to two leases
        long until;
        synchronized (victim) {
          until = System.nanoTime() + bound.toNanos();
          victim.partitionedUntil.put(role, until);
          victim.proxies.get(role).blackhole(bound);
        }
        detail = "blackhole " + victim.name + "'s " + role.name().toLowerCase(java.util.Locale.ROOT) + " for "
            + bound.toMillis() + " ms";
        // The round is the partition: the next one starts after it healed (the proxy ends it itself).
        await("the end of " + detail, bound.plusSeconds(5), () -> System.nanoTime() - until >= 0);
      }
      default -> throw new IllegalStateException("unknown action " + action);
    }
    awaitProgressBeyond(before, "round " + round + " (" + detail + ")");
    out.printf("chaos: round %3d %-40s live %s, %,d written, %d ms%n", round, detail,
        alive().stream().map(m -> m.name).toList(), writer.total(), millis(System.nanoTime() - t0));
  }

  /**
   * Draws the next action from a bag holding each action once, shuffled with the seed and refilled
   * when empty: random, yet every three rounds kill, pause and add once each, so even a short run
   * exercises all three. An add at the member limit takes the next action of the bag instead.
   */
  private Action nextAction(boolean mayAdd) {
    for (int attempt = 0; attempt < 2; attempt++) {
      if (bag.isEmpty()) {
        List<Action> fresh = new ArrayList<>(java.util.Arrays.stream(Action.values())
            .filter(a -> settings.networkFaults() || !a.network()).toList());
        java.util.Collections.shuffle(fresh, random);
        bag.addAll(fresh);
      }
      for (java.util.Iterator<Action> it = bag.iterator(); it.hasNext(); ) {
        Action a = it.next();
        if (a != Action.ADD || mayAdd) {
          it.remove();
          return a;
        }
      }
      bag.clear(); // only ADD was left and it is not allowed: start a new bag
    }
    throw new IllegalStateException("no action possible");
  }

  /** A live member that holds a partition now (a partition of a holder is what the checks are about), else any. */
  private Member aHolder(List<Member> alive) {
    Map<String, Integer> held = heldByLabel();
    List<Member> holders = alive.stream().filter(m -> held.getOrDefault(m.name, 0) > 0).toList();
    List<Member> from = holders.isEmpty() ? alive : holders;
    return from.get(random.nextInt(from.size()));
  }

  private Member startMember() {
    String name = "n" + nextMember++;
    Map<Role, FaultProxy> proxies = new java.util.EnumMap<>(Role.class);
    List<String> args = new ArrayList<>();
    for (Role role : Role.values()) {
      // Lives as long as the run may: a proxy closing itself would cut its member off for good.
      FaultProxy proxy = FaultProxy.to(name + "-" + role.name().toLowerCase(java.util.Locale.ROOT), serverHost,
          serverPort, 0, settings.budget().plus(settings.roundTimeout().multipliedBy(4)).plusMinutes(30));
      proxies.put(role, proxy);
      args.add(directUri(proxy.address()));
    }
    // Bookkeeping (the events the duplicate bound counts) is not under test: straight to the server.
    args.add(directUri(serverHost + ":" + serverPort));
    args.addAll(List.of(databaseName, name, Long.toString(settings.lease().toMillis()),
        Integer.toString(settings.checkpointBatch())));
    ChildJvm jvm = ChildJvm.start(name,
        List.of("-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"),
        ChaosNode.class, args.toArray(String[]::new));
    Member m = new Member(name, jvm, proxies);
    synchronized (members) {
      members.add(m);
    }
    return m;
  }

  /**
   * A connection string to one host with {@code directConnection=true}: through a proxy, the
   * driver must not discover the other members of a replica set and go round it. The credentials
   * and options of {@code -Dsluice.mongodb.uri} are kept.
   */
  private String directUri(String hostPort) {
    if (embedded != null) {
      return "mongodb://" + hostPort + "/?directConnection=true";
    }
    ConnectionString given = new ConnectionString(uri);
    String rest = uri.substring(uri.indexOf("://") + 3);
    String credentials = rest.contains("@") ? rest.substring(0, rest.indexOf('@') + 1) : "";
    String afterHosts = rest.substring(rest.indexOf('@') + 1);
    int slash = afterHosts.indexOf('/');
    String path = slash < 0 ? "/" : afterHosts.substring(slash);
    String options = path.contains("?") ? path.substring(path.indexOf('?') + 1) : "";
    String database = path.contains("?") ? path.substring(0, path.indexOf('?')) : path;
    StringBuilder kept = new StringBuilder();
    for (String o : options.split("&")) {
      String lower = o.toLowerCase(java.util.Locale.ROOT);
      if (!o.isEmpty() && !lower.startsWith("replicaset=") && !lower.startsWith("directconnection=")) {
        kept.append(o).append('&');
      }
    }
    return (given.isSrvProtocol() ? "mongodb://" : uri.substring(0, uri.indexOf("://") + 3)) + credentials + hostPort
        + (database.isEmpty() ? "/" : database) + "?" + kept + "directConnection=true";
  }

  private static final Duration NOISE_TICK = Duration.ofMillis(500);
  /** Every sixth tick (three seconds) one proxy resets: a cadence, so that even a short run has resets. */
  private static final int RESET_EVERY_TICKS = 6;
  private final java.util.concurrent.atomic.AtomicLong noiseTicks = new java.util.concurrent.atomic.AtomicLong();

  /**
   * One tick of the run-long noise (issue 34, 2.3): each proxy of each live member not under a
   * round's partition starts, with probability 0.15, an episode of 1-2 s in which every chunk in
   * each direction is delayed by a uniform 0 to half the renew interval (a request's round trip by
   * up to the renew interval); and every sixth tick one proxy, chosen at random, resets every
   * connection it holds. Episodes and not constant latency: the members handle each change with a
   * round trip to the sink, and a constant delay would cap a partition below the writer's rate.
   */
  private void noise() {
    try {
      long jitter = settings.renewInterval().toNanos() / 2;
      List<Member> live = alive();
      for (Member m : live) {
        synchronized (m) {
          for (Role role : Role.values()) {
            if (!m.partitioned(role) && noiseRandom.nextDouble() < 0.15) {
              m.proxies.get(role).latency(Duration.ZERO, Duration.ofNanos(jitter),
                  Duration.ofMillis(1_000 + noiseRandom.nextInt(1_000)));
              latencyEpisodes.incrementAndGet();
            }
          }
        }
      }
      if (!live.isEmpty() && noiseTicks.incrementAndGet() % RESET_EVERY_TICKS == 0) {
        Member m = live.get(noiseRandom.nextInt(live.size()));
        Role role = Role.values()[noiseRandom.nextInt(Role.values().length)];
        synchronized (m) {
          if (!m.partitioned(role)) {
            FaultProxy proxy = m.proxies.get(role);
            int open = proxy.openConnections();
            proxy.resetConnections();
            resets.incrementAndGet();
            out.printf("chaos: %s reset %d connection(s) of %s's %s proxy%n", java.time.LocalTime.now(), open, m.name,
                role.name().toLowerCase(java.util.Locale.ROOT));
          }
        }
      }
    } catch (RuntimeException e) {
      out.println("chaos: noise tick failed: " + e); // a member's proxies closed under it: next tick
    }
  }

  /** Polled by the monitor: the lease records, for the longest time a partition had no owner. */
  private void sampleOwnership() {
    try {
      for (LeaseRecord r : leases.list(leasePrefix())) {
        ownership.sample(partitionOf(r.name()), r);
      }
    } catch (RuntimeException e) {
      out.println("chaos: monitor could not read the leases for ownership: " + e);
    }
  }

  private static int partitionOf(String leaseName) {
    String tail = leaseName.substring(leaseName.lastIndexOf('#') + 1);
    return Integer.parseInt(tail.substring(0, tail.indexOf("of")));
  }

  private void awaitReady(Member m) {
    m.jvm.awaitLineStartingWith("READY " + m.name + " ", Duration.ofSeconds(90));
    m.readyNanos = System.nanoTime();
  }

  private PendingJoin join(Member m) {
    joinCount++;
    int live = alive().size();
    PendingJoin j = new PendingJoin(m, live, PARTITIONS / live, m.readyNanos);
    synchronized (pendingJoins) {
      pendingJoins.add(j);
    }
    return j;
  }

  /** Polled by the monitor: records when a joined member first holds its share. */
  private void checkJoins() {
    List<PendingJoin> open;
    synchronized (pendingJoins) {
      open = new ArrayList<>(pendingJoins);
    }
    if (open.isEmpty()) {
      return;
    }
    try {
      Map<String, Integer> held = heldByLabel();
      for (PendingJoin j : open) {
        if (j.toShare == null && held.getOrDefault(j.member.name, 0) >= j.share) {
          j.toShare = Duration.ofNanos(System.nanoTime() - j.readyNanos);
        }
      }
    } catch (RuntimeException e) {
      out.println("chaos: monitor could not read the leases: " + e);
    }
  }

  private void closePendingJoins() {
    synchronized (pendingJoins) {
      for (PendingJoin j : pendingJoins) {
        joins.add(new ChaosReport.Join(j.member.name, j.members, j.share, j.toShare));
      }
      pendingJoins.clear();
    }
  }

  private List<Member> alive() {
    synchronized (members) {
      return members.stream().filter(m -> m.alive).toList();
    }
  }

  /** Partitions held per owner label, judged on the store's clock. */
  private Map<String, Integer> heldByLabel() {
    Map<String, Integer> held = new TreeMap<>();
    for (LeaseRecord r : leases.list(leasePrefix())) {
      if (r.isHeld()) {
        held.merge(OwnerId.labelOf(r.owner()), 1, Integer::sum);
      }
    }
    return held;
  }

  private boolean allPartitionsHeld() {
    Set<String> live = alive().stream().map(m -> m.name).collect(Collectors.toSet());
    long held = leases.list(leasePrefix()).stream()
        .filter(r -> r.isHeld() && live.contains(OwnerId.labelOf(r.owner()))).count();
    return held == PARTITIONS;
  }

  private boolean holdsNothing(String label) {
    for (LeaseRecord r : leases.list(GROUP + "/" + databaseName + "." + SOURCE)) {
      if (r.isHeld() && label.equals(OwnerId.labelOf(r.owner()))) {
        return false;
      }
    }
    return true;
  }

  /** Live members and what each holds (0 for a member holding nothing). */
  private Map<String, Integer> liveHoldings() {
    Map<String, Integer> held = heldByLabel();
    Map<String, Integer> live = new TreeMap<>(java.util.Comparator.comparingInt((String n) -> Integer.parseInt(n.substring(1))));
    for (Member m : alive()) {
      live.put(m.name, held.getOrDefault(m.name, 0));
    }
    return live;
  }

  /** Ends the noise: no new latency episode or reset, and every live member's proxies pass at once. */
  private void quiet() {
    if (!settings.noise()) {
      return;
    }
    noiseThread.shutdownNow();
    try {
      if (!noiseThread.awaitTermination(10, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the noise thread did not end within 10 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while ending the noise", e);
    }
    for (Member m : alive()) {
      synchronized (m) {
        m.proxies.values().forEach(FaultProxy::pass);
      }
    }
    out.printf("chaos: %s noise ended; waiting up to %s for a balanced assignment%n", java.time.LocalTime.now(),
        settings.balanceWait());
  }

  /**
   * Each live member's last view of the group from its own log: its last quota line, and how many
   * times (and when last) it lost its membership.
   */
  private List<String> views() {
    List<String> views = new ArrayList<>();
    for (Member m : alive()) {
      String last = "no quota line";
      int lost = 0;
      String lastLost = "-";
      for (String line : m.jvm.output()) {
        int at = line.indexOf("member(s) counted");
        if (at >= 0) {
          last = line.substring(0, Math.min(12, line.length())) + " " + line.substring(Math.max(0, at - 2)).trim();
        } else if (line.contains("membership lost:")) {
          lost++;
          lastLost = line.substring(0, Math.min(12, line.length()));
        }
      }
      views.add(m.name + ": " + last + "; membership lost " + lost + "x, last at " + lastLost);
    }
    return views;
  }

  private boolean balanced() {
    Map<String, Integer> live = liveHoldings();
    int m = live.size();
    if (m == 0) {
      return false;
    }
    int floor = PARTITIONS / m;
    int ceil = (PARTITIONS + m - 1) / m;
    int sum = live.values().stream().mapToInt(Integer::intValue).sum();
    return sum == PARTITIONS && live.values().stream().allMatch(h -> h >= floor && h <= ceil);
  }

  private Map<String, Long> highs() {
    Map<String, Long> highs = new HashMap<>();
    for (Document d : db.getCollection(TRUTH).find().projection(Projections.include("high"))) {
      Object h = d.get("high");
      highs.put(d.getString("_id"), h instanceof Number n ? n.longValue() : 0L);
    }
    return highs;
  }

  private boolean caughtUp(Map<String, Long> written) {
    Map<String, Long> highs = highs();
    return written.entrySet().stream().allMatch(e -> highs.getOrDefault(e.getKey(), 0L) >= e.getValue());
  }

  /** Waits until every key applied a change written after {@code before} was taken. */
  private void awaitProgressBeyond(Map<String, Long> before, String what) {
    await("every key applying changes written after " + what, settings.roundTimeout(), () -> {
      writer.check();
      Map<String, Long> highs = highs();
      return before.entrySet().stream().allMatch(e -> highs.getOrDefault(e.getKey(), 0L) > e.getValue());
    });
  }

  private void await(String what, Duration timeout, Callable<Boolean> condition) {
    try {
      Awaitility.await(what).atMost(timeout).pollInterval(Duration.ofMillis(100))
          .pollDelay(Duration.ZERO).until(condition);
    } catch (ConditionTimeoutException e) {
      throw new AssertionError("chaos seed " + settings.seed() + ": no " + what + " within " + timeout
          + "; " + state(), e);
    }
  }

  /** As {@link #await} but returns false on timeout: for what the report shows instead of throwing. */
  private boolean awaitQuietly(String what, Duration timeout, Callable<Boolean> condition) {
    try {
      Awaitility.await(what).atMost(timeout).pollInterval(Duration.ofMillis(100)).pollDelay(Duration.ZERO).until(condition);
      return true;
    } catch (ConditionTimeoutException e) {
      out.println("chaos: no " + what + " within " + timeout + "; " + state());
      return false;
    }
  }

  private String state() {
    try {
      Map<String, Long> highs = highs();
      Map<String, Long> written = writer.written();
      Map<String, String> keysState = new LinkedHashMap<>();
      for (String k : keys) {
        keysState.put(k + "@p" + partitionOfKey.get(k), highs.getOrDefault(k, 0L) + "/" + written.get(k));
      }
      String holders = leases.list(leasePrefix()).stream()
          .map(r -> r.name().substring(r.name().indexOf('#')) + "=" + OwnerId.labelOf(r.owner()) + "(e" + r.epoch()
              + (r.isHeld() ? "" : ", expired") + ")")
          .collect(Collectors.joining(" "));
      return "live members " + alive().stream().map(m -> m.name + (m.jvm.isAlive() ? "" : "(exited)")).toList()
          + ", leases " + holders + ", applied/written per key " + keysState;
    } catch (RuntimeException e) {
      return "state unreadable: " + e;
    }
  }

  private ChaosReport analyse(Map<String, Long> written, boolean balanced, Duration wall) {
    Map<String, List<ChaosReport.Applied>> logs = new HashMap<>();
    Map<Integer, List<Long>> times = new HashMap<>();
    for (Document d : db.getCollection(TRUTH).find(Filters.in("_id", keys))) {
      String key = d.getString("_id");
      List<ChaosReport.Applied> log = new ArrayList<>();
      for (Document e : d.getList("log", Document.class, List.of())) {
        long t = ((Number) e.get("t")).longValue();
        log.add(new ChaosReport.Applied(((Number) e.get("s")).longValue(), ((Number) e.get("e")).longValue(),
            e.getString("n"), t));
        times.computeIfAbsent(partitionOfKey.get(key), p -> new ArrayList<>()).add(t);
      }
      logs.put(key, log);
    }
    ChaosReport.Analysis a = ChaosReport.analyse(logs, written);
    Map<Integer, List<ChaosReport.Applied>> byPartition = new TreeMap<>();
    logs.forEach((key, log) -> byPartition.computeIfAbsent(partitionOfKey.get(key), p -> new ArrayList<>()).addAll(log));
    Map<String, List<long[]>> pausesByNode = new HashMap<>();
    List<String> output = new ArrayList<>();
    synchronized (members) {
      for (Member m : members) {
        pausesByNode.put(m.name, List.copyOf(m.pauses));
        output.addAll(m.jvm.output());
      }
    }
    ChaosReport.Overlaps overlaps = ChaosReport.overlaps(byPartition, pausesByNode);
    ChaosReport.Deadlines deadlines = ChaosReport.deadlines(output, pausesByNode);
    ChaosReport.Gap ownerless = ownership.longestGap();
    if (ownerless.partition() >= 0) {
      out.printf("chaos: longest ownerless time: partition %d had no owner on the store's clock for %d ms from %s%n",
          ownerless.partition(), ownerless.length().toMillis(), java.time.Instant.ofEpochMilli(ownerless.fromMillis()));
    }
    ChaosReport.Stall stall =
        ChaosReport.longestStall(times, writer.firstWriteMillis(), writer.stoppedMillis());
    describeStall(stall, times);

    MongoCollection<Document> events = db.getCollection(EVENTS);
    long acquisitions = events.countDocuments(Filters.eq("type", "acquired"));
    Set<String> acquiredLeases = events.distinct("lease", Filters.eq("type", "acquired"), String.class)
        .into(new HashSet<>());
    long takeovers = acquisitions - acquiredLeases.size();
    long reopens = events.countDocuments(Filters.eq("type", "feedFailed"));
    long handlerFailures = events.countDocuments(Filters.eq("type", "handlerFailed"));
    long bound = (long) settings.checkpointBatch() * (takeovers + reopens + handlerFailures);
    return new ChaosReport(settings.seed(), roundsRun, kills, pauses, joinCount, new TreeMap<>(roundsByKind),
        latencyEpisodes.get(), resets.get(), traffic(), writer.total(),
        a.lostCount, List.copyOf(a.lost), a.orderViolations, List.copyOf(a.violations), a.duplicates, bound,
        takeovers, reopens, handlerFailures, a.deepestReplay, settings.checkpointBatch(), stall.length(),
        stall.partition(), overlaps, ownerless, deadlines, liveHoldings(), balanced,
        balanced ? List.of() : views(), List.copyOf(joins), wall);
  }

  /**
   * Prints where the longest stall was: its window, the rounds that started in or just before it
   * and the lease events of its partition around it, so a long stall can be explained from the
   * output alone.
   */
  private void describeStall(ChaosReport.Stall stall, Map<Integer, List<Long>> times) {
    if (stall.partition() < 0) {
      return;
    }
    long first = writer.firstWriteMillis();
    long start = stall.fromMillis();
    long end = start + stall.length().toMillis();
    out.printf("chaos: longest stall: partition %d applied nothing from +%.1f s to +%.1f s of the run (%s to %s)%n",
        stall.partition(), (start - first) / 1000.0, (end - first) / 1000.0,
        java.time.Instant.ofEpochMilli(start), java.time.Instant.ofEpochMilli(end));
    long until = writer.stoppedMillis();
    long quarter = Math.max(1, (until - first) / 4);
    List<String> byQuarter = new ArrayList<>();
    for (int q = 0; q < 4; q++) {
      long a = first + q * quarter;
      long b = q == 3 ? until : a + quarter;
      Map<Integer, List<Long>> inQuarter = new HashMap<>();
      times.forEach((p, ts) -> inQuarter.put(p, ts.stream().filter(t -> t >= a).toList()));
      byQuarter.add(String.format("%.1f s", ChaosReport.longestStall(inQuarter, a, b).length().toMillis() / 1000.0));
    }
    out.println("chaos: longest stall in each quarter of the run: " + byQuarter);
    Long roundBefore = roundStarts.floorKey(start);
    for (Map.Entry<Long, String> r : roundStarts.subMap(roundBefore == null ? start : roundBefore, true, end, true)
        .entrySet()) {
      out.printf("chaos:   +%.1f s %s%n", (r.getKey() - first) / 1000.0, r.getValue());
    }
    String suffix = "#" + stall.partition() + "of" + PARTITIONS;
    for (Document e : db.getCollection(EVENTS).find(Filters.and(Filters.gte("t", start - 5_000),
        Filters.lte("t", end + 1_000))).sort(new Document("t", 1))) {
      String lease = e.getString("lease");
      if (lease != null && lease.endsWith(suffix)) {
        out.printf("chaos:   +%.1f s %s %s epoch=%s %s%n", (((Number) e.get("t")).longValue() - first) / 1000.0,
            e.getString("node"), e.getString("type"), e.get("epoch"),
            e.getString("detail") == null ? "" : e.getString("detail"));
      }
    }
  }

  private void writeOutputs() {
    try {
      Files.createDirectories(settings.outputDir());
      synchronized (members) {
        for (Member m : members) {
          m.jvm.dumpOutput(settings.outputDir().resolve(m.name + ".log"));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the members' output to " + settings.outputDir(), e);
    }
  }

  /** Closes a dead member's proxies, keeping their traffic for the report. */
  private void closeProxies(Member m) {
    synchronized (m) {
      m.proxies.forEach((role, proxy) -> {
        long[] t = closedTraffic.get(role);
        synchronized (t) {
          t[0] += proxy.connectionsAccepted();
          t[1] += proxy.bytesForwarded(FaultProxy.Direction.UPSTREAM);
          t[2] += proxy.bytesForwarded(FaultProxy.Direction.DOWNSTREAM);
        }
        proxy.close();
      });
    }
  }

  /** Per role: connections accepted, bytes to the server and bytes back, over every member's proxy. */
  private Map<Role, ChaosReport.Traffic> traffic() {
    Map<Role, ChaosReport.Traffic> all = new java.util.EnumMap<>(Role.class);
    for (Role role : Role.values()) {
      long[] t = closedTraffic.get(role);
      long connections;
      long up;
      long down;
      synchronized (t) {
        connections = t[0];
        up = t[1];
        down = t[2];
      }
      for (Member m : alive()) {
        FaultProxy p = m.proxies.get(role);
        connections += p.connectionsAccepted();
        up += p.bytesForwarded(FaultProxy.Direction.UPSTREAM);
        down += p.bytesForwarded(FaultProxy.Direction.DOWNSTREAM);
      }
      all.put(role, new ChaosReport.Traffic(connections, up, down));
    }
    return all;
  }

  private static long millis(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos);
  }

  /** Kills every member, stops the writer and the server; drops the database on a real server. */
  @Override
  public void close() {
    monitor.shutdownNow();
    noiseThread.shutdownNow();
    writer.close();
    synchronized (members) {
      members.forEach(m -> m.jvm.close());
      members.forEach(m -> m.proxies.values().forEach(FaultProxy::close));
    }
    if (embedded == null) {
      db.drop();
    }
    if (writerClient != client) {
      writerClient.close();
    }
    client.close();
    if (embedded != null) {
      embedded.close();
    }
  }
}
