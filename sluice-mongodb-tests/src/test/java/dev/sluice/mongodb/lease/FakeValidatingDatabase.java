package dev.sluice.mongodb.lease;

import com.mongodb.MongoClientSettings;
import com.mongodb.MongoWriteException;
import com.mongodb.ServerAddress;
import com.mongodb.WriteError;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.List;
import org.bson.BsonDocument;
import org.bson.conversions.Bson;

/**
 * A real database whose collections behave as if they had the validator {@code {<field>:
 * {$exists: false}}}: an {@code updateOne} that sets {@code field} fails with
 * DocumentValidationFailure (121), as a real server answers. Only for servers that do not enforce
 * validators (the embedded one); everything else goes to the real database.
 */
final class FakeValidatingDatabase {
  private FakeValidatingDatabase() {}

  static MongoDatabase rejecting(MongoDatabase real, String field) {
    return proxy(MongoDatabase.class, real, (target, method, args) -> {
      Object result = invoke(method, target, args);
      if (result instanceof MongoCollection<?> collection) {
        return collection(collection, field);
      }
      if (result instanceof MongoDatabase database) { // withTimeout, withWriteConcern, ...
        return rejecting(database, field);
      }
      return result;
    });
  }

  private static MongoCollection<?> collection(MongoCollection<?> real, String field) {
    return proxy(MongoCollection.class, real, (target, method, args) -> {
      if (method.getName().equals("updateOne") && args.length == 2 && args[1] instanceof Bson u
          && sets(u, field)) {
        throw new MongoWriteException(
            new WriteError(121, "Document failed validation", new BsonDocument()),
            new ServerAddress(), List.of());
      }
      Object result = invoke(method, target, args);
      return result instanceof MongoCollection<?> c ? collection(c, field) : result;
    });
  }

  private static boolean sets(Bson update, String field) {
    BsonDocument doc = update.toBsonDocument(BsonDocument.class,
        MongoClientSettings.getDefaultCodecRegistry());
    return doc.containsKey("$set") && doc.getDocument("$set").containsKey(field);
  }

  @FunctionalInterface
  private interface Handler {
    Object handle(Object target, java.lang.reflect.Method method, Object[] args) throws Throwable;
  }

  private static <T> T proxy(Class<T> type, Object target, Handler handler) {
    InvocationHandler h = (p, method, args) -> handler.handle(target, method,
        args == null ? new Object[0] : args);
    return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h));
  }

  private static Object invoke(java.lang.reflect.Method method, Object target, Object[] args)
      throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
