package dev.sluice.app.service.config;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses durations written as {@code 500ms}, {@code 10s}, {@code 2m}, {@code 1h} or ISO-8601 {@code PT10S}. */
public final class Durations {
  private static final Pattern SHORT = Pattern.compile("(\\d+)\\s*(ms|s|m|h)");

  /** Longer than any sensible lease, delay or back-off, and far from overflowing an instant. */
  static final Duration MAX = Duration.ofDays(3650);

  private Durations() {}

  /** The duration {@code text} (null if null), or a {@link ConfigException} naming {@code path}. */
  public static Duration parse(String text, String path) {
    if (text == null) {
      return null;
    }
    String t = text.trim();
    Matcher m = SHORT.matcher(t);
    Duration d;
    try {
      if (m.matches()) {
        long n = Long.parseLong(m.group(1));
        d = switch (m.group(2)) {
          case "ms" -> Duration.ofMillis(n);
          case "s" -> Duration.ofSeconds(n);
          case "m" -> Duration.ofMinutes(n);
          default -> Duration.ofHours(n);
        };
      } else {
        d = Duration.parse(t);
      }
    } catch (DateTimeParseException e) {
      throw new ConfigException(path, "'" + text + "' is not a duration (examples: 500ms, 10s, 2m, PT10S)");
    } catch (ArithmeticException | NumberFormatException e) {
      throw new ConfigException(path, "'" + text + "' is too long a duration (at most " + MAX.toDays() + " days)");
    }
    if (d.compareTo(MAX) > 0) {
      throw new ConfigException(path, "'" + text + "' is too long a duration (at most " + MAX.toDays() + " days)");
    }
    return d;
  }
}
