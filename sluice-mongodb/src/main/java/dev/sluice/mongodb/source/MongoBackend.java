package dev.sluice.mongodb.source;

import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.source.SourceBackend;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/**
 * A MongoDB deployment as a {@link SourceBackend}: one client, a change stream feed per
 * collection, leases and parked changes in collections of the same database. The service and the
 * Kafka Connect connector both build theirs here from their own configuration (ADR 0128).
 */
public final class MongoBackend implements SourceBackend<BsonDocument> {
  /** The dead-letter collection when none is named. */
  public static final String DEFAULT_DEAD_LETTERS = "sluice_dead_letters";

  private static final BsonDocument PING = new BsonDocument("ping", new BsonInt32(1));
  private static final JsonWriterSettings RELAXED = JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();

  private final Builder settings;
  private final MongoClient client;

  private MongoBackend(Builder settings) {
    this.settings = settings;
    this.client = MongoClients.create(settings.client);
  }

  /** A backend whose client has {@code client} settings, reading collections of {@code database}. */
  public static Builder builder(MongoClientSettings client, String database) {
    return new Builder(client, database);
  }

  /** The backend's client (the service's tests: sessions it holds when it closes). */
  public MongoClient client() {
    return client;
  }

  /** The database of the collections, leases and parked changes. */
  public MongoDatabase database() {
    return client.getDatabase(settings.database);
  }

  @Override
  public String name() {
    return "MongoDB";
  }

  @Override
  public String targetKind() {
    return "collection";
  }

  /** The builder of {@code collection}'s feed with the backend's settings, for a front-end's own additions. */
  public MongoChangeFeed.Builder feedBuilder(String collection) {
    MongoChangeFeed.Builder b = MongoChangeFeed.builder(client, settings.database, collection);
    if (settings.batchSize != null) {
      b.batchSize(settings.batchSize);
    }
    if (settings.fullDocument != null) {
      b.fullDocument(settings.fullDocument);
    }
    if (settings.fullDocumentBeforeChange != null) {
      b.fullDocumentBeforeChange(settings.fullDocumentBeforeChange);
    }
    if (settings.onMissingImage != null) {
      b.onMissingImage(settings.onMissingImage);
    }
    return b;
  }

  @Override
  public MongoChangeFeed feed(String collection) {
    return feedBuilder(collection).build();
  }

  @Override
  public LeaseStore leaseStore(Duration bound) {
    MongoLeaseStore.Builder b = MongoLeaseStore.builder(database())
        .operationTimeout(bound == null ? MongoLeaseStore.DEFAULT_OPERATION_TIMEOUT : bound);
    if (settings.leaseCollection != null) {
      b.collection(settings.leaseCollection);
    }
    return b.build();
  }

  @Override
  public MongoDeadLetterStore deadLetters(Duration bound) {
    String c = settings.deadLetterCollection == null ? DEFAULT_DEAD_LETTERS : settings.deadLetterCollection;
    return MongoDeadLetterStore.create(bound == null ? database()
        : database().withTimeout(bound.toMillis(), TimeUnit.MILLISECONDS), c);
  }

  @Override
  public long parked(DeadLetterStore<BsonDocument> store, String scope) {
    return ((MongoDeadLetterStore) store).count(scope);
  }

  @Override
  public String json(BsonDocument document) {
    return document.toJson(RELAXED);
  }

  /** {@code ping} on the {@code admin} database. */
  @Override
  public void ping(Duration bound) {
    client.getDatabase("admin").withTimeout(bound.toMillis(), TimeUnit.MILLISECONDS).runCommand(PING);
  }

  /** Closes the client. */
  @Override
  public void close() {
    client.close();
  }

  /** The backend's settings; each one left unset keeps the feed's or the store's default. */
  public static final class Builder {
    private final MongoClientSettings client;
    private final String database;
    private String leaseCollection;
    private String deadLetterCollection;
    private Integer batchSize;
    private FullDocument fullDocument;
    private FullDocumentBeforeChange fullDocumentBeforeChange;
    private MongoChangeFeed.OnMissingImage onMissingImage;

    private Builder(MongoClientSettings client, String database) {
      this.client = ConfigurationException.requireNonNull(client, "client");
      this.database = ConfigurationException.requireNonNull(database, "database");
    }

    /** The lease store's collection; null: the store's default. */
    public Builder leaseCollection(String collection) {
      this.leaseCollection = collection;
      return this;
    }

    /** The dead-letter collection; null: {@link #DEFAULT_DEAD_LETTERS}. */
    public Builder deadLetterCollection(String collection) {
      this.deadLetterCollection = collection;
      return this;
    }

    /** Every feed's {@link MongoChangeFeed.Builder#batchSize}. */
    public Builder batchSize(int size) {
      this.batchSize = size;
      return this;
    }

    /** Every feed's {@link MongoChangeFeed.Builder#fullDocument}. */
    public Builder fullDocument(FullDocument mode) {
      this.fullDocument = mode;
      return this;
    }

    /** Every feed's {@link MongoChangeFeed.Builder#fullDocumentBeforeChange}. */
    public Builder fullDocumentBeforeChange(FullDocumentBeforeChange mode) {
      this.fullDocumentBeforeChange = mode;
      return this;
    }

    /** Every feed's {@link MongoChangeFeed.Builder#onMissingImage}. */
    public Builder onMissingImage(MongoChangeFeed.OnMissingImage policy) {
      this.onMissingImage = policy;
      return this;
    }

    /** The backend, with its client created. */
    public MongoBackend build() {
      return new MongoBackend(this);
    }
  }
}
