package dev.sluice.app.cli;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Hides the passwords of connection strings in anything Sluice prints: {@code
 * mongodb://app:s3cret@db1/} becomes {@code mongodb://app:****@db1/}. Applied to error messages,
 * log lines and status output, so a configuration error, a driver exception quoting its URI or a
 * log line never shows a password.
 */
public final class Secrets {
  /** {@code scheme://user:password@}: the password runs to the last '@' before the host part. */
  private static final Pattern USER_INFO = Pattern.compile("([a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\\s'\"]*):([^\\s'\"/?#]*)@");
  /** {@code password=...} in query strings and key=value texts. */
  private static final Pattern PASSWORD_PARAM = Pattern.compile("(?i)((?:password|passwd|pwd)=)([^&\\s'\",;]+)");

  private Secrets() {}

  /** {@code text} with every connection-string password replaced by {@code ****}. */
  public static String mask(String text) {
    if (text == null) {
      return null;
    }
    Matcher m = USER_INFO.matcher(text);
    String masked = m.replaceAll(r -> Matcher.quoteReplacement(r.group(1) + ":****@"));
    return PASSWORD_PARAM.matcher(masked).replaceAll(r -> Matcher.quoteReplacement(r.group(1) + "****"));
  }
}
