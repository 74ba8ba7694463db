package dev.sluice.mongodb.lock;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.concurrent.CountDownLatch;

/**
 * A driver-level FAKE: a real database whose commands, once {@link #stopAnswering()} is called,
 * wait until {@link #answerAgain()}, as a server without a reachable majority (or a partitioned
 * network with no driver timeout) leaves a call hanging. No available server can be made to do
 * this on demand. Methods that only derive handles ({@code getCollection}, {@code with...},
 * {@code get...}) are not held.
 */
final class NeverAnsweringDatabase {
  private volatile CountDownLatch gate;
  private final MongoDatabase database;

  NeverAnsweringDatabase(MongoDatabase real) {
    this.database = proxy(MongoDatabase.class, real);
  }

  MongoDatabase database() {
    return database;
  }

  void stopAnswering() {
    gate = new CountDownLatch(1);
  }

  void answerAgain() {
    CountDownLatch g = gate;
    gate = null;
    if (g != null) {
      g.countDown();
    }
  }

  private <T> T proxy(Class<T> type, Object target) {
    InvocationHandler h = (p, method, args) -> {
      if (!derivesAHandle(method)) {
        CountDownLatch g = gate;
        if (g != null) {
          g.await();
        }
      }
      Object result;
      try {
        result = method.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
      if (result instanceof MongoDatabase d) { // withTimeout, withWriteConcern, ...
        return proxy(MongoDatabase.class, d);
      }
      return result instanceof MongoCollection<?> c ? proxy(MongoCollection.class, c) : result;
    };
    return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h));
  }

  private static boolean derivesAHandle(Method method) {
    String n = method.getName();
    return n.startsWith("get") || n.startsWith("with") || n.equals("toString")
        || n.equals("hashCode") || n.equals("equals");
  }
}
