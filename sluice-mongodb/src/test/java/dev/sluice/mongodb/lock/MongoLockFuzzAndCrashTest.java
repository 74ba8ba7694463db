package dev.sluice.mongodb.lock;

import dev.sluice.testkit.lock.LockFuzzAndCrash;
import dev.sluice.testkit.lock.LockTestBackend;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Two JVMs, SIGKILL and SIGSTOP against locks on MongoDB. The server runs in this (test) JVM,
 * which is never paused or killed; the children connect to it over the wire.
 */
class MongoLockFuzzAndCrashTest extends LockFuzzAndCrash {
  private static EmbeddedMongo mongo;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start();
  }

  @AfterAll
  static void stop() {
    mongo.close();
  }

  @Override
  protected Class<? extends LockTestBackend> backendClass() {
    return MongoLockTestBackend.class;
  }

  @Override
  protected String backendArgument() {
    return mongo.connectionString();
  }
}
