package dev.sluice.postgres.feed;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.regex.Pattern;
import org.postgresql.PGProperty;

/**
 * A PostgreSQL change feed: the changes of a publication, read through a logical replication slot
 * with the server's built-in {@code pgoutput} plugin (no extension to install). Each partition
 * of each consumer group reads through a slot of its own ({@link #slotName}, created on first use),
 * and keeps the changes of the rows whose key it owns, as on MongoDB. Documents are column maps
 * ({@link PgValues} says which Java type each PostgreSQL type becomes).
 *
 * <p>Positions are transaction boundaries (LSNs), with the count of a transaction's changes already
 * processed when a checkpoint falls inside one ({@link PgPosition}). The slot's confirmed position
 * moves only through {@link FeedCursor#acknowledge}, which the engine calls after its checkpoint is
 * committed: the server never recycles WAL that was not processed.
 *
 * <p>The server needs {@code wal_level=logical}, a free replication slot per partition and a WAL
 * sender per reading partition ({@code max_replication_slots}, {@code max_wal_senders}), a user
 * with the REPLICATION attribute, and the publication ({@code CREATE PUBLICATION name FOR TABLE
 * ...}). Tables need a primary key (or {@code REPLICA IDENTITY FULL}) for updates and deletes.
 *
 * <p>The implementation is the package-private {@code PostgresChangeFeedImpl}, built only by
 * {@link Builder} (ADR 0118).
 */
public interface PostgresChangeFeed extends ChangeFeed<Map<String, Object>> {

  /**
   * A feed of publication {@code publication} of the database {@code jdbcUrl} names
   * ({@code jdbc:postgresql://host:5432/shop}).
   */
  static Builder builder(String jdbcUrl, String user, String password, String publication) {
    return new Builder(jdbcUrl, user, password, publication);
  }

  /**
   * This feed as consumer group {@code group} reads it: with slots of the group's own (a slot has
   * one confirmed position, so two groups sharing one would take changes from each other).
   */
  @Override
  PostgresChangeFeed forGroup(String group);

  /** A row as it is now: its change key, its primary key columns and all its columns. */
  record CurrentRow(String table, String key, Map<String, Object> documentKey, Map<String, Object> document) {}

  /**
   * Every row of the feed's tables as it is now, table by table in primary key order, read
   * {@code chunk} rows per statement while iterating (no snapshot, no slot): what a current-state
   * replay publishes. Tables need a primary key. The iterator's connection closes at the end; a
   * read error is a FeedException naming the table.
   */
  Iterable<CurrentRow> currentRows(int chunk);

  /**
   * One slot's state: whether a reader holds it, the server's {@code wal_status} ({@code reserved},
   * {@code extended}, {@code unreserved}: about to be invalidated, {@code lost}), how much WAL it
   * keeps on the server ({@code retainedBytes}: from its restart point to the current WAL
   * position), and how much more may be written before it is invalidated ({@code safeBytes}, null
   * when {@code max_slot_wal_keep_size} is unlimited).
   */
  record SlotStats(String slot, boolean active, String walStatus, long retainedBytes, Long safeBytes) {}

  /** The state of this feed's slot for {@code partition}, or empty if it does not exist (yet). */
  Optional<SlotStats> slot(PartitionSpec partition);

  /**
   * Every replication slot of this database whose name starts with this feed's {@code
   * <prefix>_<database>_} (the slots feeds of this prefix created, for every group, stream and
   * layout), by name, with its state.
   */
  List<SlotStats> slotsOfPrefix();

  /**
   * Drops slot {@code name}, one of {@link #slotsOfPrefix()}. The server refuses to drop a slot a
   * reader holds ({@code active}): that refusal is a FeedException naming the slot, and the slot
   * stays. The caller decides that no lease uses it; a partition whose checkpoint needs it then
   * meets lost history, under its policy.
   */
  void dropSlot(String name);

  /**
   * The slot of one partition: {@code <prefix>_<database>_<group>_<stream>_<i>of<n>} (without the
   * group when the feed is used without a listener) in lower case with other characters as '_'
   * (slots are the server's, not a database's: the database keeps two databases' feeds of one stream
   * name apart, the group two consumer groups), shortened with a hash when longer than 63 characters.
   */
  String slotName(PartitionSpec partition);

  /**
   * Checks, without creating anything, what reading this feed needs of the server: it can be
   * reached, {@code wal_level} is logical, the publication exists and publishes the feed's table,
   * and that table has a primary key or another replica identity. For configuration checks before
   * any slot exists (a Kafka Connect {@code validate} call, say).
   *
   * @throws FeedException naming what is missing and how to add it; retryable when the server
   *     could not be reached
   */
  void verify();

  /** Settings of a {@link PostgresChangeFeed}. */
  final class Builder {
    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}");
    private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}\\.[A-Za-z_][A-Za-z0-9_$]{0,62}");

    final String url;
    final String user;
    final String password;
    final String publication;
    String table;
    String stream;
    String slotPrefix = "sluice";
    int batchSize = 500;
    Duration statusInterval = Duration.ofSeconds(10);
    Duration replicationTimeout;
    String replicationUrl;
    boolean failover;
    List<String> messagePrefixes = List.of();
    boolean rows = true;

    private Builder(String url, String user, String password, String publication) {
      this.url = url;
      this.user = user;
      this.password = password;
      this.publication = publication;
    }

    /** Only the changes of this table ({@code schema.table}); default: every table of the publication. */
    public Builder table(String schemaAndTable) {
      this.table = schemaAndTable;
      return this;
    }

    /** The stream name, part of lease names; default the table, else the publication. */
    public Builder stream(String stream) {
      this.stream = stream;
      return this;
    }

    /** The prefix of this feed's slot names (default {@code sluice}). */
    public Builder slotPrefix(String prefix) {
      this.slotPrefix = prefix;
      return this;
    }

    /** The most changes one poll returns (default 500). */
    public Builder batchSize(int batchSize) {
      this.batchSize = batchSize;
      return this;
    }

    /**
     * How often the feed tells the server it is alive and how far it confirmed, and asks it for a
     * reply (default 10 s).
     */
    public Builder statusInterval(Duration interval) {
      this.statusInterval = interval;
      return this;
    }

    /**
     * How long the replication connection may go without a byte from the server before the feed
     * gives it up (default 30 s, or three status intervals if that is longer; set, it must be
     * longer than the status interval): the feed asks the server for a
     * reply every {@link #statusInterval}, so a connection that stays silent this long is cut off
     * or half-open (a network partition, a dead server, a walsender the server already ended).
     * The read that notices closes the connection and fails with a retryable FeedException; the
     * listener re-opens the partition at its last checkpoint (ADR 0106). Also the socket timeout of
     * opening the replication connection and its stream.
     */
    public Builder replicationTimeout(Duration timeout) {
      this.replicationTimeout = timeout;
      return this;
    }

    /**
     * The JDBC URL of the replication connections (default: the feed's URL), for a network path of
     * their own: the other connections (catalog, snapshot, slot management) through a pooler that
     * does not pass replication connections (PgBouncer), the replication connection straight to
     * the server. It must name the same database on the same server; per-connection settings such
     * as {@code options=-c wal_sender_timeout=30s} go here too (ADR 0107).
     */
    public Builder replicationUrl(String jdbcUrl) {
      this.replicationUrl = jdbcUrl;
      return this;
    }

    /**
     * Whether the slots this feed creates are failover slots (PostgreSQL 17 and later; default
     * false): a standby with {@code sync_replication_slots = on} keeps a copy of each, so after a
     * failover the new primary has the slots at their confirmed positions and the partitions
     * resume instead of running the history-lost policy. The primary's {@code
     * synchronized_standby_slots} should name that standby's physical slot, so that no change
     * reaches this feed before the standby has it. Applies to slots created from now on; an
     * existing slot keeps its setting ({@code ALTER_REPLICATION_SLOT name (FAILOVER true)} on a
     * replication connection changes it).
     */
    public Builder failover(boolean failover) {
      this.failover = failover;
      return this;
    }

    /**
     * Also delivers the logical-decoding messages ({@code pg_logical_emit_message(transactional,
     * prefix, content)}, PostgreSQL 14 and later) whose prefix starts with one of {@code prefixes}
     * ({@code ""}: every message), as changes of operation {@code MESSAGE} (ADR 0096): an outbox
     * without an outbox table. Key: the message's prefix (so its partition, and the order kept,
     * follow the prefix: {@code order:42} keeps one order's messages in order); document: {@code
     * prefix}, {@code content} (a String, or {@code byte[]} when it is not UTF-8), {@code
     * transactional}, {@code lsn}. A transactional message comes in commit order among its
     * transaction's rows; a non-transactional one when the server decodes it (even if its
     * transaction rolls back). Messages are no table's, so a {@link #table} filter does not apply
     * to them: give the prefixes to one feed of a publication only. Default: none, and the server
     * does not send them.
     */
    public Builder messages(String... prefixes) {
      ConfigurationException.requireNonNull(prefixes, "messages");
      for (String p : prefixes) {
        ConfigurationException.require(p != null, "messages", java.util.Arrays.toString(prefixes),
            "must not contain null (\"\" accepts every prefix)");
      }
      this.messagePrefixes = List.of(prefixes);
      return this;
    }

    /**
     * Whether row changes are delivered (default true). False, with {@link #messages}: a feed of
     * the publication's logical-decoding messages only (a stream of messages beside the tables'
     * streams); such a feed has no snapshot to read.
     */
    public Builder rows(boolean rows) {
      this.rows = rows;
      return this;
    }

    public PostgresChangeFeed build() {
      ConfigurationException.requireNonNull(url, "url");
      ConfigurationException.require(url.startsWith("jdbc:postgresql:") && org.postgresql.Driver.parseURL(url, null) != null,
          "url", url, "must be a PostgreSQL JDBC URL (jdbc:postgresql://host:5432/database)");
      ConfigurationException.requireNonNull(publication, "publication");
      ConfigurationException.require(NAME.matcher(publication).matches(), "publication", publication,
          "must be a PostgreSQL identifier (letters, digits, '_', '$'; 63 characters at most)");
      ConfigurationException.require(table == null || TABLE.matcher(table).matches(), "table", table,
          "must be schema.table, e.g. public.orders");
      ConfigurationException.require(slotPrefix != null && NAME.matcher(slotPrefix).matches()
          && slotPrefix.length() <= 20, "slotPrefix", slotPrefix, "must be an identifier of 20 characters at most");
      ConfigurationException.require(rows || !messagePrefixes.isEmpty(), "rows", rows,
          "may be false only with messages(...): the feed would deliver nothing");
      ConfigurationException.require(batchSize >= 1, "batchSize", batchSize, "must be >= 1");
      ConfigurationException.requireNonNull(statusInterval, "statusInterval");
      ConfigurationException.require(!statusInterval.isNegative() && !statusInterval.isZero()
          && statusInterval.compareTo(Duration.ofMinutes(1)) < 0, "statusInterval", statusInterval,
          "must be positive and below a minute (the server's default wal_sender_timeout)");
      if (replicationTimeout == null) {
        Duration three = statusInterval.multipliedBy(3);
        replicationTimeout = three.compareTo(Duration.ofSeconds(30)) > 0 ? three : Duration.ofSeconds(30);
      }
      ConfigurationException.require(replicationTimeout.compareTo(statusInterval) > 0, "replicationTimeout",
          replicationTimeout, "must be longer than the status interval (" + statusInterval + "), at which the"
              + " server is asked for a reply");
      if (replicationUrl != null) {
        Properties main = org.postgresql.Driver.parseURL(url, null);
        Properties replication = replicationUrl.startsWith("jdbc:postgresql:")
            ? org.postgresql.Driver.parseURL(replicationUrl, null) : null;
        ConfigurationException.require(replication != null, "replicationUrl", replicationUrl,
            "must be a PostgreSQL JDBC URL (jdbc:postgresql://host:5432/database)");
        String db = main.getProperty(PGProperty.PG_DBNAME.getName(), "");
        ConfigurationException.require(db.equals(replication.getProperty(PGProperty.PG_DBNAME.getName(), "")),
            "replicationUrl", replicationUrl, "must name the feed's database, " + db + " (a slot belongs to one"
                + " database)");
      }
      return new PostgresChangeFeedImpl(this);
    }
  }
}
