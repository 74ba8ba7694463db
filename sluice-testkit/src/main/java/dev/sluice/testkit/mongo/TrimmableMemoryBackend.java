package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Clock;

/** The memory backend with a {@link TrimmingOplog}. */
final class TrimmableMemoryBackend extends MemoryBackend {

  private TrimmingOplog trimming;

  TrimmableMemoryBackend(Clock clock) {
    super(clock);
  }

  @Override
  @SuppressWarnings("unchecked") // the oplog collection holds documents
  protected Oplog createOplog() {
    Oplog standard = super.createOplog();
    MongoCollection<Document> entries =
        (MongoCollection<Document>) resolveDatabase("local").resolveCollection("oplog.rs", true);
    trimming = new TrimmingOplog(standard, entries);
    return trimming;
  }

  TrimmingOplog oplog() {
    if (trimming == null) {
      throw new IllegalStateException("the oplog is not enabled");
    }
    return trimming;
  }
}
