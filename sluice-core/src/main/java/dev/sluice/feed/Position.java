package dev.sluice.feed;

import java.time.Instant;
import java.util.Objects;

/**
 * Where a partition's feed stands: a MongoDB resume token, a PostgreSQL LSN. Opaque to the
 * engine: only the {@link ChangeFeed} that produced it interprets {@link #token()}.
 *
 * @param token the feed's serialized form, never blank (MongoDB: the resume token as extended
 *     JSON or an operation time; PostgreSQL: an LSN such as {@code 0/16B3748})
 * @param time the source commit time of the change at this position (MongoDB cluster time,
 *     PostgreSQL commit timestamp), or {@code null} when the feed does not know it; used for lag
 *     and for reporting gaps, never for ordering
 */
public record Position(String token, Instant time) {
  public Position {
    Objects.requireNonNull(token, "token");
    if (token.isBlank()) {
      throw new IllegalArgumentException("Position token must not be blank");
    }
  }

  public static Position of(String token) {
    return new Position(token, null);
  }

  @Override
  public String toString() {
    return time == null ? token : token + "@" + time;
  }
}
