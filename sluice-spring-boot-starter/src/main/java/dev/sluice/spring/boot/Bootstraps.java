package dev.sluice.spring.boot;

import dev.sluice.listener.BootstrapPolicy;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.Locale;

/** Reads {@code sluice.listeners.<name>.bootstrap}: oldest, latest, snapshot or an instant. */
final class Bootstraps {
  private Bootstraps() {}

  /**
   * The policy {@code value} names.
   *
   * @throws IllegalArgumentException naming what is accepted
   */
  static BootstrapPolicy parse(String value) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException("must be oldest, latest, snapshot or an ISO-8601 instant");
    }
    switch (value.trim().toLowerCase(Locale.ROOT)) {
      case "oldest":
        return BootstrapPolicy.oldest();
      case "latest":
        return BootstrapPolicy.latest();
      case "snapshot":
        return BootstrapPolicy.snapshot();
      default:
        try {
          return BootstrapPolicy.at(Instant.parse(value.trim()));
        } catch (DateTimeParseException e) {
          throw new IllegalArgumentException(
              "must be oldest, latest, snapshot or an ISO-8601 instant such as 2026-01-01T00:00:00Z");
        }
    }
  }
}
