package dev.sluice.mongodb.internal;

import com.mongodb.ErrorCategory;
import com.mongodb.MongoException;
import com.mongodb.MongoServerException;

/** Classification of MongoDB errors shared by the stores. */
public final class MongoErrors {
  private MongoErrors() {}

  /**
   * Whether {@code e} is a duplicate-key error (E11000 and its legacy codes), whichever exception
   * type carries it: a write error of {@code insertOne}/{@code updateOne}, or a command error of
   * {@code findAndModify}. For a conditional upsert it means the document exists but failed the
   * condition, or a concurrent writer inserted it first.
   */
  public static boolean isDuplicateKey(MongoException e) {
    return ErrorCategory.fromErrorCode(e.getCode()) == ErrorCategory.DUPLICATE_KEY;
  }

  /**
   * {@code e} as an operator reads it: the kind of failure, the server's error code and name
   * (also where the driver wrapped the server's error in one of its own, as a timeout), and the
   * message. The driver's messages of several errors (50 MaxTimeMSExpired, write concern errors,
   * network errors) name neither the code nor the kind.
   */
  public static String describe(MongoException e) {
    // The first error in the chain with a server's code: the driver wraps the server's answer in
    // its own exception where a client-side timeout (timeoutMS) or a retry was involved.
    MongoException coded = e;
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof MongoException m && m.getCode() > 0) {
        coded = m;
        break;
      }
    }
    int code = coded.getCode();
    String name = coded instanceof MongoServerException s ? s.getErrorCodeName() : null;
    StringBuilder b = new StringBuilder(e.getClass().getSimpleName());
    if (code > 0) {
      b.append(" (error ").append(code);
      if (name != null && !name.isEmpty()) {
        b.append(' ').append(name);
      }
      b.append(')');
    }
    b.append(": ").append(e.getMessage());
    if (coded != e) {
      b.append(" (").append(coded.getClass().getSimpleName()).append(": ").append(coded.getMessage()).append(')');
    }
    return b.toString();
  }
}
