package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Clock;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** The memory backend with the test kit's {@link FaithfulOplog} and {@link PostImageDatabase}. */
final class TrimmableMemoryBackend extends MemoryBackend {

  private FaithfulOplog oplog;
  /** Namespaces whose collection has changeStreamPreAndPostImages enabled. */
  private final Set<String> withImages = ConcurrentHashMap.newKeySet();

  TrimmableMemoryBackend(Clock clock) {
    super(clock);
  }

  @Override
  public MemoryDatabase openOrCreateDatabase(String databaseName) {
    return new PostImageDatabase(databaseName, getCursorRegistry(), withImages);
  }

  @Override
  @SuppressWarnings("unchecked") // the oplog collection holds documents
  protected Oplog createOplog() {
    super.createOplog(); // creates local.oplog.rs; its change events are replaced by ours
    MongoCollection<Document> entries =
        (MongoCollection<Document>) resolveDatabase("local").resolveCollection("oplog.rs", true);
    oplog = new FaithfulOplog(this, entries, getCursorRegistry(), withImages);
    return oplog;
  }

  FaithfulOplog oplog() {
    if (oplog == null) {
      throw new IllegalStateException("the oplog is not enabled");
    }
    return oplog;
  }
}
