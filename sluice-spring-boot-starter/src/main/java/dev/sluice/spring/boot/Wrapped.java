package dev.sluice.spring.boot;

import dev.sluice.ConfigurationException;
import java.util.function.Supplier;

/** Calls a Sluice builder and names the property prefix in what it refuses. */
final class Wrapped {
  private Wrapped() {}

  /** {@code build}'s result; a {@link ConfigurationException} it throws is prefixed with {@code prefix}. */
  static <T> T configuration(String prefix, Supplier<T> build) {
    try {
      return build.get();
    } catch (ConfigurationException e) {
      if (e.getMessage() != null && e.getMessage().startsWith("sluice.")) {
        throw e;
      }
      throw new ConfigurationException(prefix + ": " + e.getMessage());
    }
  }
}
