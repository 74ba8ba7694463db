package dev.sluice.mongodb.lease;

import com.mongodb.MongoClientException;
import com.mongodb.MongoException;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoServerException;
import com.mongodb.MongoWriteConcernException;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.mongodb.internal.MongoErrors;
import java.util.Set;

/**
 * Whether a failed lease-store request may succeed if simply tried again. Duplicate keys never
 * get here: they are contention ({@code Optional.empty()}).
 */
final class MongoLeaseFailures {
  private MongoLeaseFailures() {}

  /** Server errors only a change of configuration or schema can fix. */
  private static final Set<Integer> DETERMINISTIC = Set.of(
      2, // BadValue
      9, // FailedToParse
      13, // Unauthorized
      14, // TypeMismatch
      18, // AuthenticationFailed
      20, // IllegalOperation
      26, // NamespaceNotFound
      67, // CannotCreateIndex
      85, // IndexOptionsConflict
      86, // IndexKeySpecsConflict
      100, // UnsatisfiableWriteConcern
      121, // DocumentValidationFailure
      166, // CommandNotSupportedOnView
      8000, // AtlasError (authorization on Atlas)
      10334); // BSONObjectTooLarge

  /** Server errors of failovers, shutdowns and timeouts. */
  private static final Set<Integer> TRANSIENT = Set.of(
      6, // HostUnreachable
      7, // HostNotFound
      50, // MaxTimeMSExpired
      64, // WriteConcernFailed (wtimeout)
      89, // NetworkTimeout
      91, // ShutdownInProgress
      112, // WriteConflict
      134, // ReadConcernMajorityNotAvailableYet
      189, // PrimarySteppedDown
      262, // ExceededTimeLimit
      9001, // SocketException
      10107, // NotWritablePrimary
      11600, // InterruptedAtShutdown
      11602, // InterruptedDueToReplStateChange
      13435, // NotPrimaryNoSecondaryOk
      13436); // NotPrimaryOrSecondary

  static boolean retryable(MongoException e) {
    if (MongoErrors.isTransient(e)) {
      return true;
    }
    if (e instanceof MongoSecurityException) {
      return false;
    }
    int code = e instanceof MongoWriteConcernException w
        ? w.getWriteConcernError().getCode() : e.getCode();
    if (DETERMINISTIC.contains(code)) {
      return false;
    }
    if (TRANSIENT.contains(code)) {
      return true;
    }
    if (e instanceof MongoServerException) {
      // An unknown server error: retrying is the cautious answer for a lease, whose holder
      // loses nothing by waiting and is stopped by expiry anyway.
      return true;
    }
    // The client itself refused (a closed client, an unsupported option): retrying cannot help.
    return !(e instanceof MongoClientException);
  }

  static LeaseStoreException failure(String action, String name, MongoException e) {
    boolean retryable = retryable(e);
    // A server that cannot be reached is what the operator must hear first, not the step that needed it.
    boolean unreachable = e instanceof com.mongodb.MongoTimeoutException || e instanceof com.mongodb.MongoSocketException
        || (e instanceof com.mongodb.MongoOperationTimeoutException && (e.getCause() instanceof com.mongodb.MongoTimeoutException
            || e.getCause() instanceof com.mongodb.MongoSocketException));
    return new LeaseStoreException("MongoDB lease store could not " + (unreachable ? "reach the server to " : "") + action
        + (name == null ? "" : " lease '" + name + "'") + " ("
        + (retryable ? "may succeed if retried" : "will not succeed until the database or its"
        + " configuration is fixed") + "): " + dev.sluice.mongodb.internal.MongoErrors.describe(e),
        retryable, e);
  }
}
