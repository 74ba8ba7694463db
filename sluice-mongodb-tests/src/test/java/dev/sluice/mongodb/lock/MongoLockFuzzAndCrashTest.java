package dev.sluice.mongodb.lock;

import dev.sluice.testkit.lock.LockFuzzAndCrash;
import dev.sluice.testkit.lock.LockTestBackend;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Two JVMs, SIGKILL and SIGSTOP against locks on MongoDB. The server runs in this (test) JVM,
 * which is never paused or killed; the children connect to it over the wire.
 */
class MongoLockFuzzAndCrashTest extends LockFuzzAndCrash {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Override
  protected Class<? extends LockTestBackend> backendClass() {
    return MongoLockTestBackend.class;
  }

  @Override
  protected String backendArgument() {
    return MONGO.connectionString();
  }
}
