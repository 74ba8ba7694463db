package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Clock;

/** The memory backend with the test kit's {@link FaithfulOplog}. */
final class TrimmableMemoryBackend extends MemoryBackend {

  private FaithfulOplog oplog;

  TrimmableMemoryBackend(Clock clock) {
    super(clock);
  }

  @Override
  @SuppressWarnings("unchecked") // the oplog collection holds documents
  protected Oplog createOplog() {
    super.createOplog(); // creates local.oplog.rs; its change events are replaced by ours
    MongoCollection<Document> entries =
        (MongoCollection<Document>) resolveDatabase("local").resolveCollection("oplog.rs", true);
    oplog = new FaithfulOplog(this, entries, getCursorRegistry());
    return oplog;
  }

  FaithfulOplog oplog() {
    if (oplog == null) {
      throw new IllegalStateException("the oplog is not enabled");
    }
    return oplog;
  }
}
