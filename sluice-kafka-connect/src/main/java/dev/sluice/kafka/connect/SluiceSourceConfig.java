package dev.sluice.kafka.connect;

import com.mongodb.ConnectionString;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerSettings;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

/**
 * The configuration of {@link SluiceSourceConnector}: every key, its default, validator and
 * recommender. Connect's REST {@code validate} call reports a bad value under its key; the
 * connector adds the checks that need the database (unknown collection, a partition count above
 * the feed's limit) in {@link SluiceSourceConnector#validate}.
 *
 * <p>The keys that are settings of a listener take their defaults from {@link ListenerSettings}:
 * {@link #PARTITIONS} ({@code partitions}), {@link #STARTUP_MODE} ({@code bootstrap}, without a
 * time), {@link #HISTORY_LOST_POLICY} ({@code onHistoryLost}, in Connect's words) and {@link
 * #HEARTBEAT_INTERVAL_MS} ({@code checkpoint.heartbeat}). The listener's other settings have no
 * counterpart here: Connect owns the distribution of the partitions over the tasks (no group,
 * lease, renewal, acquisition or threads), the offsets (no checkpoint batching) and the delivery to
 * Kafka (no handler to retry, block or run concurrently); ADR 0116.
 */
public final class SluiceSourceConfig extends AbstractConfig {

  /** Which database the connector reads: {@code mongodb} or {@code postgresql}. */
  public static final String SOURCE_TYPE = "source.type";
  /** MongoDB connection string. */
  public static final String MONGODB_URI = "mongodb.connection.string";
  /** The database of the collections. */
  public static final String MONGODB_DATABASE = "mongodb.database";
  /** The collections to read, each one stream. */
  public static final String COLLECTIONS = "mongodb.collections";
  /** PostgreSQL JDBC URL. */
  public static final String POSTGRES_URL = "postgres.url";
  /** PostgreSQL user (with the REPLICATION attribute). */
  public static final String POSTGRES_USER = "postgres.user";
  /** PostgreSQL password. */
  public static final String POSTGRES_PASSWORD = "postgres.password";
  /** The publication whose tables are read. */
  public static final String POSTGRES_PUBLICATION = "postgres.publication";
  /** The tables to read ({@code schema.table}), each one stream. */
  public static final String POSTGRES_TABLES = "postgres.tables";
  /** The prefix of the replication slots' names. */
  public static final String POSTGRES_SLOT_PREFIX = "postgres.slot.prefix";
  /**
   * The default {@link #POSTGRES_SLOT_PREFIX}: other than the {@code sluice} of Sluice's listeners,
   * whose slots are {@code sluice_<database>_<group>_...}, so a connector named like a listener group
   * reads through slots of its own.
   */
  public static final String DEFAULT_SLOT_PREFIX = "sluicekc";
  /** Prefixes of the PostgreSQL logical-decoding messages published (stream {@link #MESSAGES_STREAM}). */
  public static final String POSTGRES_MESSAGES_PREFIXES = "postgres.messages.prefixes";
  /** The stream of the publication's logical-decoding messages, beside the tables' streams. */
  public static final String MESSAGES_STREAM = "messages";
  /** Whether stopping the connector drops its replication slots (for connectors that are deleted). */
  public static final String POSTGRES_SLOT_DROP_ON_STOP = "postgres.slot.drop.on.stop";
  /** Whether the connector's new replication slots are failover slots (PostgreSQL 17). */
  public static final String POSTGRES_SLOT_FAILOVER = "postgres.slot.failover";
  /** How often a task confirms its committed offsets to the source (PostgreSQL slots). */
  public static final String OFFSET_CONFIRM_INTERVAL_MS = "offset.confirm.interval.ms";
  /** Partitions per collection: each a source partition of its own, spread over the tasks. */
  public static final String PARTITIONS = "partitions";
  /** Records of collection {@code c} go to topic {@code <prefix>.<database>.<c>}. */
  public static final String TOPIC_PREFIX = "topic.prefix";
  /** Where a partition without a committed offset starts. */
  public static final String STARTUP_MODE = "startup.mode";
  /** What happens when a committed offset fell off the oplog. */
  public static final String HISTORY_LOST_POLICY = "history.lost.policy";
  /** What happens when the connector finds committed offsets of another partition count. */
  public static final String PARTITIONS_CHANGE = "partitions.change";
  /** The record value: a Connect {@code Struct} or Sluice's JSON envelope as a string. */
  public static final String VALUE_FORMAT = "value.format";
  /** MongoDB {@code fullDocument} mode for updates. */
  public static final String FULL_DOCUMENT = "mongodb.full.document";
  /** MongoDB {@code fullDocumentBeforeChange} (pre-images). */
  public static final String FULL_DOCUMENT_BEFORE_CHANGE = "mongodb.full.document.before.change";
  /** What happens with a change whose required MongoDB pre- or post-image is missing (expired, never recorded). */
  public static final String MISSING_IMAGE = "mongodb.missing.image";
  /** Interval of heartbeat records for partitions that produced nothing; 0 disables them. */
  public static final String HEARTBEAT_INTERVAL_MS = "heartbeat.interval.ms";
  /** Topic of the heartbeat records. */
  public static final String HEARTBEAT_TOPIC = "heartbeat.topic";
  /** What happens with a change the feed cannot decode. */
  public static final String UNDECODABLE_POLICY = "undecodable.policy";
  /** Topic of parked (undecodable) changes. */
  public static final String PARKED_TOPIC = "parked.topic";
  /** Longest wait of one {@code poll} for changes. */
  public static final String POLL_MAX_WAIT_MS = "poll.max.wait.ms";
  /** Largest number of changes read from one partition per poll. */
  public static final String BATCH_SIZE = "batch.size";
  /**
   * Default of {@link #BATCH_SIZE}: 4,096, not the feeds' 500 (ADR 0125). With exactly-once
   * delivery Connect commits a transaction per poll, and a backlog read 500 changes per poll paid
   * four times the commits of Debezium's 2,048 (0.89x its throughput); a poll still returns what
   * is there when less has arrived.
   */
  public static final int DEFAULT_BATCH_SIZE = 4096;

  /** The most partitions per stream the connector accepts (MongoDB's feed limit; a slot each on PostgreSQL). */
  public static final int MAX_PARTITIONS = MongoChangeFeed.MAX_PARTITIONS;
  /** Values of {@link #SOURCE_TYPE}. */
  public static final List<String> SOURCE_TYPES = List.of("mongodb", "postgresql");
  /** Values of {@link #STARTUP_MODE}. */
  public static final List<String> STARTUP_MODES = List.of("oldest", "latest", "snapshot");
  /** Values of {@link #HISTORY_LOST_POLICY}. */
  public static final List<String> HISTORY_LOST_POLICIES = List.of("fail", "skip", "resnapshot");
  /** The listener's {@link HistoryLostPolicy} of each value of {@link #HISTORY_LOST_POLICY}. */
  private static final Map<String, HistoryLostPolicy> HISTORY_LOST = Map.of("fail", HistoryLostPolicy.STOP,
      "skip", HistoryLostPolicy.SKIP_TO_LATEST, "resnapshot", HistoryLostPolicy.RESNAPSHOT);
  /** The value of {@link #HISTORY_LOST_POLICY} for the listener's default {@code onHistoryLost}. */
  private static final String DEFAULT_HISTORY_LOST = HISTORY_LOST.entrySet().stream()
      .filter(e -> e.getValue() == ListenerSettings.historyLost(null, "onHistoryLost")).findFirst().orElseThrow()
      .getKey();
  /** Values of {@link #PARTITIONS_CHANGE}. */
  public static final List<String> PARTITIONS_CHANGES = List.of("fail", "restart-from-oldest-offset");
  /** Values of {@link #VALUE_FORMAT}. */
  public static final List<String> VALUE_FORMATS = List.of("struct", "envelope");
  /** Values of {@link #FULL_DOCUMENT}. */
  public static final List<String> FULL_DOCUMENTS = List.of("updateLookup", "whenAvailable", "required");
  /** Values of {@link #FULL_DOCUMENT_BEFORE_CHANGE}. */
  public static final List<String> FULL_DOCUMENTS_BEFORE_CHANGE = List.of("off", "whenAvailable", "required");
  /** Values of {@link #MISSING_IMAGE}. */
  public static final List<String> MISSING_IMAGES = List.of("fail", "park");
  /** Values of {@link #UNDECODABLE_POLICY}. */
  public static final List<String> UNDECODABLE_POLICIES = List.of("fail", "park");

  /** Internal: the (collection, partition) units of one task, set by the connector. */
  static final String TASK_UNITS = "sluice.task.units";
  /** Internal: the task's index, for its metrics. */
  static final String TASK_INDEX = "sluice.task.index";

  private static final String SOURCE = "Source";
  private static final String MONGO = "MongoDB";
  private static final String POSTGRES = "PostgreSQL";
  private static final String RECORDS = "Records";
  private static final String RELIABILITY = "Reliability";

  /** The definition of every key. */
  public static final ConfigDef CONFIG_DEF = new ConfigDef()
      .define(SOURCE_TYPE, Type.STRING, "mongodb", ConfigDef.CaseInsensitiveValidString.in(
              SOURCE_TYPES.toArray(String[]::new)), Importance.HIGH,
          "The database read: mongodb (the mongodb.* keys) or postgresql (the postgres.* keys). The keys of the"
              + " other one must not be set.", SOURCE, 1, Width.SHORT, "Source", new Choices(SOURCE_TYPES))
      .define(MONGODB_URI, Type.PASSWORD, null, new UriValidator(), Importance.HIGH,
          "MongoDB connection string of a replica set or a mongos, for example "
              + "mongodb://db1,db2,db3/?replicaSet=rs0. Stored as a password (it may hold credentials)."
              + " Required with source.type=mongodb.", MONGO, 1, Width.LONG, "Connection string")
      .define(MONGODB_DATABASE, Type.STRING, null, new ConfigDef.NonEmptyString(),
          Importance.HIGH, "Database of the collections. Required with source.type=mongodb.", MONGO, 2,
          Width.MEDIUM, "Database")
      .define(COLLECTIONS, Type.LIST, null, new NamesValidator("collection"), Importance.HIGH,
          "Collections to read, comma-separated; each is a stream with its own topic. validate() refuses"
              + " a collection the database does not have. Required with source.type=mongodb.", MONGO, 3,
          Width.LONG, "Collections")
      .define(POSTGRES_URL, Type.STRING, null, new JdbcUrlValidator(), Importance.HIGH,
          "PostgreSQL JDBC URL, for example jdbc:postgresql://db:5432/shop. The server needs wal_level=logical,"
              + " a replication slot and a WAL sender per table and partition. Required with"
              + " source.type=postgresql.", POSTGRES, 1, Width.LONG, "JDBC URL")
      .define(POSTGRES_USER, Type.STRING, null, Importance.HIGH,
          "PostgreSQL user, with the REPLICATION attribute (or a superuser). May instead be in the URL.",
          POSTGRES, 2, Width.MEDIUM, "User")
      .define(POSTGRES_PASSWORD, Type.PASSWORD, null, Importance.HIGH, "PostgreSQL password.", POSTGRES, 3,
          Width.MEDIUM, "Password")
      .define(POSTGRES_PUBLICATION, Type.STRING, null, new ConfigDef.NonEmptyString(), Importance.HIGH,
          "The publication (CREATE PUBLICATION name FOR TABLE ...) that publishes the tables. validate()"
              + " refuses one that does not exist. Required with source.type=postgresql.", POSTGRES, 4,
          Width.MEDIUM, "Publication")
      .define(POSTGRES_TABLES, Type.LIST, null, new NamesValidator("table"), Importance.HIGH,
          "Tables to read, as schema.table, comma-separated; each is a stream with its own topic"
              + " <prefix>.<database>.<schema>.<table>. validate() refuses a table the publication does not"
              + " publish or that has no primary key. Required with source.type=postgresql.", POSTGRES, 5,
          Width.LONG, "Tables")
      .define(POSTGRES_SLOT_PREFIX, Type.STRING, DEFAULT_SLOT_PREFIX, new ConfigDef.NonEmptyString(), Importance.LOW,
          "Prefix of the replication slots, named <prefix>_<database>_<connector>_<table>_<i>of<n>. Not the"
              + " 'sluice' of Sluice's own listeners, so a connector and a listener group of the same name never"
              + " share a slot (a slot has one reader and one confirmed position). The slots"
              + " outlive the connector: after deleting it, drop them (SELECT pg_drop_replication_slot(name)),"
              + " or the server keeps WAL for them.", POSTGRES, 6, Width.SHORT, "Slot prefix")
      .define(OFFSET_CONFIRM_INTERVAL_MS, Type.LONG, 10_000L, ConfigDef.Range.between(100, 600_000),
          Importance.LOW, "How often a task reads its committed offsets back and confirms them to the source:"
              + " a PostgreSQL slot may then recycle the WAL before them. Never more than Connect committed is"
              + " confirmed. MongoDB needs no confirmation.", POSTGRES, 7, Width.SHORT, "Offset confirmation")
      .define(POSTGRES_SLOT_FAILOVER, Type.BOOLEAN, false, Importance.MEDIUM,
          "PostgreSQL 17 and later: create the replication slots as failover slots. A standby with"
              + " sync_replication_slots = on (and hot_standby_feedback, a physical slot named in the primary's"
              + " synchronized_standby_slots) keeps them in step, so after a failover the tasks resume on the"
              + " new primary instead of finding their slots gone (history lost on every partition). Applies to"
              + " slots created from then on.", POSTGRES, 8, Width.SHORT, "Failover slots")
      .define(POSTGRES_MESSAGES_PREFIXES, Type.LIST, "", Importance.MEDIUM,
          "Also publish the logical-decoding messages (pg_logical_emit_message, PostgreSQL 14 and later) whose"
              + " prefix starts with one of these, comma-separated (an outbox without a table, ADR 0096): as stream '"
              + "messages' beside the tables, with slots and partitions of its own, to topic"
              + " <prefix>.<database>.messages, record key the message's prefix, operation MESSAGE. Transactional"
              + " messages come in commit order, only if their transaction commits. Empty (the default): none.",
          POSTGRES, 10, Width.LONG, "Message prefixes")
      .define(POSTGRES_SLOT_DROP_ON_STOP, Type.BOOLEAN, false, Importance.MEDIUM,
          "Drop the connector's replication slots (one per table and partition) when the connector stops,"
              + " so that a deleted connector leaves no slot keeping WAL on the server. Kafka Connect does not"
              + " tell a connector why it stops: a deletion, but also a pause, a reconfiguration, a rebalance"
              + " or a worker shutdown stops it, and the slots are dropped then too; the next start finds its"
              + " committed offsets without their slot, which is history lost (" + "history.lost.policy"
              + " applies). So turn it on just before deleting the connector (PUT the configuration with it,"
              + " then DELETE), or for connectors whose history may be lost. The connector waits up to 30 s"
              + " for its tasks to let go of each slot and never drops a slot a reader holds. Default false:"
              + " the slots outlive the connector; 'sluice slots' lists and drops them.", POSTGRES, 9,
          Width.SHORT, "Drop slots on stop")
      .define(PARTITIONS, Type.INT, ListenerSettings.PARTITIONS.defaultValue(), ConfigDef.Range.between(1, MAX_PARTITIONS),
          Importance.HIGH,
          "Partitions of each collection (a stable hash of the document key): each partition is a Connect"
              + " source partition with its own offset, and the partitions of one collection are spread over"
              + " the tasks. Every change of a key is in one partition, so per-key order holds. Changing it"
              + " later is governed by " + PARTITIONS_CHANGE + ".", RECORDS, 1, Width.SHORT, "Partitions")
      .define(TOPIC_PREFIX, Type.STRING, "sluice", new TopicPrefixValidator(), Importance.HIGH,
          "Records of collection c go to topic <prefix>.<database>.<c>, of table s.t to"
              + " <prefix>.<database>.<s.t>.", RECORDS, 2, Width.MEDIUM, "Topic prefix")
      .define(VALUE_FORMAT, Type.STRING, "struct", ConfigDef.CaseInsensitiveValidString.in(
              VALUE_FORMATS.toArray(String[]::new)), Importance.MEDIUM,
          "struct: the value is a Connect Struct with a schema (Sluice's envelope fields; documents as relaxed"
              + " extended JSON strings), for the JSON converter with or without schemas and for single"
              + " message transforms. envelope: the value is Sluice's JSON envelope (sluice/1) as a string,"
              + " byte for byte what Sluice's own Kafka relay publishes (use the StringConverter).",
          RECORDS, 3, Width.SHORT, "Value format", new Choices(VALUE_FORMATS))
      .define(FULL_DOCUMENT, Type.STRING, "updateLookup", ConfigDef.CaseInsensitiveValidString.in(
              FULL_DOCUMENTS.toArray(String[]::new)), Importance.LOW,
          "MongoDB fullDocument mode for updates: updateLookup (the document as read, possibly later),"
              + " whenAvailable or required (the update's own post-image, MongoDB 6.0+ with"
              + " changeStreamPreAndPostImages).", RECORDS, 4, Width.SHORT, "Full document",
          new Choices(FULL_DOCUMENTS))
      .define(FULL_DOCUMENT_BEFORE_CHANGE, Type.STRING, "off", ConfigDef.CaseInsensitiveValidString.in(
              FULL_DOCUMENTS_BEFORE_CHANGE.toArray(String[]::new)), Importance.LOW,
          "MongoDB pre-images (fullDocumentBeforeChange): off, whenAvailable or required; the value's"
              + " 'before' field carries them.", RECORDS, 5, Width.SHORT, "Pre-images",
          new Choices(FULL_DOCUMENTS_BEFORE_CHANGE))
      .define(MISSING_IMAGE, Type.STRING, "fail", ConfigDef.CaseInsensitiveValidString.in(
              MISSING_IMAGES.toArray(String[]::new)), Importance.LOW,
          "A change whose required image (" + FULL_DOCUMENT + " or " + FULL_DOCUMENT_BEFORE_CHANGE + " required) the"
              + " server no longer has (error 47: expired after changeStreamOptions.preAndPostImages.expireAfterSeconds,"
              + " or written before images were enabled): fail (the task fails naming the change's position,"
              + " expireAfterSeconds and what to do; nothing is skipped), or park (it goes to " + PARKED_TOPIC
              + " with the reason, as an undecodable change, and so does every later change of its key; needs "
              + UNDECODABLE_POLICY + "=park).", RECORDS, 6, Width.SHORT, "Missing image",
          new Choices(MISSING_IMAGES))
      .define(STARTUP_MODE, Type.STRING, ListenerSettings.BOOTSTRAP.defaultValue(), ConfigDef.CaseInsensitiveValidString.in(
              STARTUP_MODES.toArray(String[]::new)), Importance.MEDIUM,
          "Where a partition without a committed offset starts: oldest (the oldest oplog entry: nothing written"
              + " before the connector was created is missed), latest, or snapshot (every existing document"
              + " as a SNAPSHOT change, then the stream). The resolved start is committed as a heartbeat at"
              + " once, so a restart never resolves it again.", RELIABILITY, 1, Width.SHORT, "Startup mode",
          new Choices(STARTUP_MODES))
      .define(HISTORY_LOST_POLICY, Type.STRING, DEFAULT_HISTORY_LOST, ConfigDef.CaseInsensitiveValidString.in(
              HISTORY_LOST_POLICIES.toArray(String[]::new)), Importance.HIGH,
          "A committed offset that fell off the oplog (MongoDB error 286; 136 when the oplog rolls past a"
              + " running task's cursor): fail (the task fails, naming the"
              + " lost range and what to do; nothing is skipped), skip (continue at the latest position,"
              + " logged at ERROR with the gap and committed at once as a heartbeat), or resnapshot (as skip,"
              + " then every document of the partition is read again as a SNAPSHOT change).",
          RELIABILITY, 2, Width.SHORT, "History lost", new Choices(HISTORY_LOST_POLICIES))
      .define(PARTITIONS_CHANGE, Type.STRING, "fail", ConfigDef.CaseInsensitiveValidString.in(
              PARTITIONS_CHANGES.toArray(String[]::new)), Importance.MEDIUM,
          "Committed offsets exist for another partition count than '" + PARTITIONS + "' (a different"
              + " partitioning is a different set of source partitions): fail (tasks fail, naming both"
              + " counts), or restart-from-oldest-offset (every new partition starts at the cluster time of"
              + " the oldest offset of the old layout: nothing lost, changes after it published again).",
          RELIABILITY, 3, Width.SHORT, "Partition count change", new Choices(PARTITIONS_CHANGES))
      .define(HEARTBEAT_INTERVAL_MS, Type.LONG, ListenerSettings.CHECKPOINT_HEARTBEAT.defaultValue().toMillis(),
          ConfigDef.Range.between(0, 3_600_000),
          Importance.MEDIUM, "A partition whose position moved without a record for this long (idle or"
              + " filtered) sends a heartbeat record to " + HEARTBEAT_TOPIC + " with its position as the"
              + " offset, so offsets never fall out of the oplog window. 0 disables heartbeats.",
          RELIABILITY, 4, Width.SHORT, "Heartbeat interval")
      .define(HEARTBEAT_TOPIC, Type.STRING, "__sluice-heartbeat", new ConfigDef.NonEmptyString(),
          Importance.LOW, "Topic of the heartbeat records.", RELIABILITY, 5, Width.MEDIUM, "Heartbeat topic")
      .define(UNDECODABLE_POLICY, Type.STRING, "fail", ConfigDef.CaseInsensitiveValidString.in(
              UNDECODABLE_POLICIES.toArray(String[]::new)), Importance.MEDIUM,
          "A change the feed cannot decode, or whose document cannot be converted: fail (the task fails,"
              + " naming the change and its position), or park (it goes to " + PARKED_TOPIC + ", and so does"
              + " every later change of its key, which keeps per-key order; other keys go on).",
          RELIABILITY, 6, Width.SHORT, "Undecodable change", new Choices(UNDECODABLE_POLICIES))
      .define(PARKED_TOPIC, Type.STRING, "__sluice-parked", new ConfigDef.NonEmptyString(), Importance.LOW,
          "Topic of parked changes.", RELIABILITY, 7, Width.MEDIUM, "Parked topic")
      .define(POLL_MAX_WAIT_MS, Type.LONG, 500L, ConfigDef.Range.between(1, 60_000), Importance.LOW,
          "Longest wait of one poll of a task when nothing arrives.", RECORDS, 7, Width.SHORT, "Poll wait")
      .define(BATCH_SIZE, Type.INT, DEFAULT_BATCH_SIZE, ConfigDef.Range.between(1, 100_000),
          Importance.MEDIUM, "Largest number of changes read per partition and poll, also the driver's batch"
              + " size. With exactly.once.support=required, Connect commits one transaction per poll: this"
              + " bounds how many changes share a commit.", RECORDS, 8, Width.SHORT, "Batch size");

  /** Parses {@code props}; throws {@link ConfigException} naming the first bad key. */
  public SluiceSourceConfig(Map<String, String> props) {
    this(props, true);
  }

  private SluiceSourceConfig(Map<String, String> props, boolean checkSourceKeys) {
    super(CONFIG_DEF, props);
    String[] wrong = checkSourceKeys ? wrongSourceKey() : null;
    if (wrong != null) {
      throw new ConfigException(wrong[0] + " " + wrong[1]);
    }
  }

  /** Parses {@code props} without {@link #wrongSourceKey}, which the caller reports under its key. */
  static SluiceSourceConfig withoutSourceCheck(Map<String, String> props) {
    return new SluiceSourceConfig(props, false);
  }

  /** The keys the source type requires: its server, and what of it is read. */
  List<String> requiredKeys() {
    return postgres() ? List.of(POSTGRES_URL, POSTGRES_PUBLICATION, POSTGRES_TABLES)
        : List.of(MONGODB_URI, MONGODB_DATABASE, COLLECTIONS);
  }

  /** The keys the source type requires and forbids: {@code [key, message]} of the first wrong one, or null. */
  String[] wrongSourceKey() {
    for (String key : requiredKeys()) {
      if (get(key) == null) {
        return new String[] {key, "is required with " + SOURCE_TYPE + "=" + sourceType()};
      }
    }
    List<String> other = postgres() ? List.of(MONGODB_URI, MONGODB_DATABASE, COLLECTIONS)
        : List.of(POSTGRES_URL, POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_PUBLICATION, POSTGRES_TABLES);
    for (String key : other) {
      if (get(key) != null) {
        return new String[] {key, "belongs to the other source: " + SOURCE_TYPE + " is " + sourceType()
            + " (set " + SOURCE_TYPE + "=" + (postgres() ? "mongodb" : "postgresql") + " or remove " + key + ")"};
      }
    }
    if (!postgres() && missingImagePark() && !parkUndecodable()) {
      return new String[] {MISSING_IMAGE, "park sends such a change to " + PARKED_TOPIC + " as an undecodable change,"
          + " which " + UNDECODABLE_POLICY + "=fail refuses: set " + UNDECODABLE_POLICY + "=park too, or "
          + MISSING_IMAGE + "=fail"};
    }
    if (postgres() && partitionsChange().equals("restart-from-oldest-offset")) {
      return new String[] {PARTITIONS_CHANGE, "restart-from-oldest-offset needs positions by time, which PostgreSQL"
          + " WAL does not have; use fail (and a new connector name to start over)"};
    }
    return null;
  }

  /** {@code mongodb} or {@code postgresql}. */
  public String sourceType() {
    return lower(SOURCE_TYPE);
  }

  public boolean postgres() {
    return sourceType().equals("postgresql");
  }

  /** The connector's name (Connect's {@code name} key), which names its slots and fences. */
  public String connectorName() {
    Object name = originals().get("name");
    return name == null ? "sluice" : name.toString();
  }

  /** The streams read: the collections, or the tables (and {@link #MESSAGES_STREAM} when messages are asked for). */
  public List<String> streams() {
    if (!postgres()) {
      return getList(COLLECTIONS);
    }
    List<String> tables = getList(POSTGRES_TABLES);
    if (messagePrefixes().isEmpty()) {
      return tables;
    }
    List<String> out = new java.util.ArrayList<>(tables == null ? List.of() : tables);
    out.add(MESSAGES_STREAM);
    return out;
  }

  /** {@link #POSTGRES_MESSAGES_PREFIXES}: empty when messages are not published. */
  public List<String> messagePrefixes() {
    List<String> prefixes = getList(POSTGRES_MESSAGES_PREFIXES);
    return prefixes == null ? List.of() : prefixes;
  }

  public String postgresUrl() {
    return getString(POSTGRES_URL);
  }

  public String postgresUser() {
    return getString(POSTGRES_USER);
  }

  public String postgresPassword() {
    Password p = getPassword(POSTGRES_PASSWORD);
    return p == null ? null : p.value();
  }

  public String publication() {
    return getString(POSTGRES_PUBLICATION);
  }

  public String slotPrefix() {
    return getString(POSTGRES_SLOT_PREFIX);
  }

  public boolean dropSlotsOnStop() {
    return getBoolean(POSTGRES_SLOT_DROP_ON_STOP);
  }

  public boolean slotFailover() {
    return getBoolean(POSTGRES_SLOT_FAILOVER);
  }

  public Duration offsetConfirmInterval() {
    return Duration.ofMillis(getLong(OFFSET_CONFIRM_INTERVAL_MS));
  }

  public String uri() {
    Password p = getPassword(MONGODB_URI);
    return p == null ? null : p.value();
  }

  /** The database: mongodb.database, or the one the JDBC URL names. */
  public String database() {
    if (postgres()) {
      java.util.Properties parsed = org.postgresql.Driver.parseURL(postgresUrl(), null);
      return parsed == null ? "" : parsed.getProperty("PGDBNAME", "");
    }
    return getString(MONGODB_DATABASE);
  }

  public int partitions() {
    return getInt(PARTITIONS);
  }

  /** The topic of {@code stream}'s records (a collection or a schema.table). */
  public String topic(String stream) {
    return getString(TOPIC_PREFIX) + "." + database() + "." + stream;
  }

  public String startupMode() {
    return lower(STARTUP_MODE);
  }

  public String historyLostPolicy() {
    return lower(HISTORY_LOST_POLICY);
  }

  /** {@link #HISTORY_LOST_POLICY} as the listener's policy. */
  public HistoryLostPolicy historyLost() {
    return HISTORY_LOST.get(historyLostPolicy());
  }

  public String partitionsChange() {
    return lower(PARTITIONS_CHANGE);
  }

  public boolean envelopeValues() {
    return lower(VALUE_FORMAT).equals("envelope");
  }

  public FullDocument fullDocument() {
    return switch (lower(FULL_DOCUMENT)) {
      case "whenavailable" -> FullDocument.WHEN_AVAILABLE;
      case "required" -> FullDocument.REQUIRED;
      default -> FullDocument.UPDATE_LOOKUP;
    };
  }

  public FullDocumentBeforeChange fullDocumentBeforeChange() {
    return switch (lower(FULL_DOCUMENT_BEFORE_CHANGE)) {
      case "whenavailable" -> FullDocumentBeforeChange.WHEN_AVAILABLE;
      case "required" -> FullDocumentBeforeChange.REQUIRED;
      default -> FullDocumentBeforeChange.OFF;
    };
  }

  /** Whether a change without its required image is parked ({@link #MISSING_IMAGE}=park) rather than failing the task. */
  public boolean missingImagePark() {
    return lower(MISSING_IMAGE).equals("park");
  }

  /** The heartbeat interval, or null when heartbeats are off. */
  public Duration heartbeatInterval() {
    long ms = getLong(HEARTBEAT_INTERVAL_MS);
    return ms == 0 ? null : Duration.ofMillis(ms);
  }

  public String heartbeatTopic() {
    return getString(HEARTBEAT_TOPIC);
  }

  public boolean parkUndecodable() {
    return lower(UNDECODABLE_POLICY).equals("park");
  }

  public String parkedTopic() {
    return getString(PARKED_TOPIC);
  }

  public Duration pollMaxWait() {
    return Duration.ofMillis(getLong(POLL_MAX_WAIT_MS));
  }

  public int batchSize() {
    return getInt(BATCH_SIZE);
  }

  private String lower(String key) {
    return getString(key).toLowerCase(Locale.ROOT);
  }

  /** Recommends the allowed values of an enumerated key. */
  private record Choices(List<String> values) implements ConfigDef.Recommender {
    @Override
    public List<Object> validValues(String name, Map<String, Object> parsedConfig) {
      return List.copyOf(values);
    }

    @Override
    public boolean visible(String name, Map<String, Object> parsedConfig) {
      return true;
    }
  }

  /** The connection string must parse (the driver's own parser, so its message names the problem). */
  private static final class UriValidator implements ConfigDef.Validator {
    @Override
    public void ensureValid(String name, Object value) {
      String uri = value instanceof Password p ? p.value() : (String) value;
      if (value == null) {
        return; // required or forbidden by source.type, checked with the other keys
      }
      if (uri == null || uri.isBlank()) {
        throw new ConfigException(name, "[hidden]", "must be a MongoDB connection string");
      }
      try {
        new ConnectionString(uri);
      } catch (RuntimeException e) {
        // Never echo the value: it may hold a password.
        throw new ConfigException(name, "[hidden]", "is not a valid MongoDB connection string: " + e.getMessage());
      }
    }

    @Override
    public String toString() {
      return "a MongoDB connection string (mongodb:// or mongodb+srv://)";
    }
  }

  /** At least one collection (a legal collection name) or table ({@code schema.table}), none twice. */
  private static final class NamesValidator implements ConfigDef.Validator {
    private final String what;

    NamesValidator(String what) {
      this.what = what;
    }

    @Override
    public void ensureValid(String name, Object value) {
      if (value == null) {
        return; // required or forbidden by source.type, checked with the other keys
      }
      @SuppressWarnings("unchecked")
      List<String> list = (List<String>) value;
      if (list.isEmpty()) {
        throw new ConfigException(name, value, "must name at least one " + what);
      }
      for (String c : list) {
        boolean legal = what.equals("table")
            ? c.matches("[A-Za-z_][A-Za-z0-9_$]{0,62}\\.[A-Za-z_][A-Za-z0-9_$]{0,62}")
            : !(c.isBlank() || c.contains("$") || c.indexOf('\0') >= 0 || c.startsWith("system."));
        if (!legal) {
          throw new ConfigException(name, value, "'" + c + "' is not a " + what + " name Sluice can read"
              + (what.equals("table") ? " (schema.table, e.g. public.orders)" : ""));
        }
      }
      if (list.stream().distinct().count() != list.size()) {
        throw new ConfigException(name, value, "names a " + what + " twice");
      }
    }

    @Override
    public String toString() {
      return "a non-empty list of " + what + " names";
    }
  }

  /** A PostgreSQL JDBC URL the driver parses. The value is never echoed: it may hold a password. */
  private static final class JdbcUrlValidator implements ConfigDef.Validator {
    @Override
    public void ensureValid(String name, Object value) {
      if (value == null) {
        return;
      }
      String url = (String) value;
      if (!url.startsWith("jdbc:postgresql:") || org.postgresql.Driver.parseURL(url, null) == null) {
        throw new ConfigException(name, "[hidden]",
            "is not a PostgreSQL JDBC URL (jdbc:postgresql://host:5432/database)");
      }
    }

    @Override
    public String toString() {
      return "jdbc:postgresql://host:port/database";
    }
  }

  /** A topic prefix must make legal topic names. */
  private static final class TopicPrefixValidator implements ConfigDef.Validator {
    @Override
    public void ensureValid(String name, Object value) {
      String s = (String) value;
      if (s == null || s.isEmpty() || !s.matches("[a-zA-Z0-9._-]+")) {
        throw new ConfigException(name, value, "must be non-empty and use only letters, digits, '.', '_' and '-'");
      }
    }

    @Override
    public String toString() {
      return "letters, digits, '.', '_', '-'";
    }
  }
}
