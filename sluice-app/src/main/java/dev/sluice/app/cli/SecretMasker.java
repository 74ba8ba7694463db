package dev.sluice.app.cli;

import com.fasterxml.jackson.core.JsonStreamContext;
import net.logstash.logback.mask.ValueMasker;

/** Masks connection-string passwords ({@link Secrets}) in every string field of a JSON log line. */
public final class SecretMasker implements ValueMasker {
  @Override
  public Object mask(JsonStreamContext context, Object value) {
    if (value instanceof CharSequence text) {
      String masked = Secrets.mask(text.toString());
      return masked.contentEquals(text) ? null : masked;
    }
    return null;
  }
}
