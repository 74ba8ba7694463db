package dev.sluice.mongodb.internal;

import com.mongodb.ErrorCategory;
import com.mongodb.MongoConnectionPoolClearedException;
import com.mongodb.MongoCursorNotFoundException;
import com.mongodb.MongoException;
import com.mongodb.MongoExecutionTimeoutException;
import com.mongodb.MongoInterruptedException;
import com.mongodb.MongoNodeIsRecoveringException;
import com.mongodb.MongoNotPrimaryException;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoServerException;
import com.mongodb.MongoServerUnavailableException;
import com.mongodb.MongoSocketException;
import com.mongodb.MongoTimeoutException;

/** Classification of MongoDB errors shared by the change feed and the stores. */
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
   * Whether {@code e} says that the request did not reach a server able to answer it, rather than
   * that a server refused it, so that the same request can succeed later with nothing changed: a
   * network error, a timeout (the driver's or the server's), a connection pool the driver cleared
   * or a server it dropped from the topology during a failover (an operation that had chosen that
   * server, or was waiting for one of its connections, fails with these), an interrupted wait, a
   * primary stepping down or a member recovering, a cursor the server closed, or an answer the
   * server or the driver labels as worth retrying. One list for the change feed and the lease store
   * (and so the locks); what a server's error code says beyond it is each one's own judgement (a
   * lease store retries an unknown server error, a change stream stops on one).
   */
  public static boolean isTransient(MongoException e) {
    if (e.hasErrorLabel("RetryableWriteError")
        || e.hasErrorLabel(MongoException.TRANSIENT_TRANSACTION_ERROR_LABEL)
        || e.hasErrorLabel(MongoException.RETRYABLE_ERROR_LABEL)
        || e.hasErrorLabel(MongoException.SYSTEM_OVERLOADED_ERROR_LABEL)) {
      return true;
    }
    if (e instanceof MongoSecurityException) {
      return false;
    }
    return e instanceof MongoSocketException
        || e instanceof MongoTimeoutException // also the client-side timeoutMS's MongoOperationTimeoutException
        || e instanceof MongoConnectionPoolClearedException
        || e instanceof MongoServerUnavailableException
        || e instanceof MongoInterruptedException
        || e instanceof MongoExecutionTimeoutException
        || e instanceof MongoNotPrimaryException
        || e instanceof MongoNodeIsRecoveringException
        || e instanceof MongoCursorNotFoundException;
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
