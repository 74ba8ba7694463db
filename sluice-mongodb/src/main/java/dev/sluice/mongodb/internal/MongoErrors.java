package dev.sluice.mongodb.internal;

import com.mongodb.ErrorCategory;
import com.mongodb.MongoException;

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
}
