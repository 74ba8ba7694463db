package dev.sluice.app.cli;

import ch.qos.logback.classic.pattern.KeyValuePairConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;

/**
 * The event's key-value pairs as {@code key="value"} after a space (nothing when it has none), with
 * connection-string passwords masked ({@link Secrets}); used as {@code %maskedKvp}.
 */
public final class MaskingKeyValueConverter extends KeyValuePairConverter {
  @Override
  public String convert(ILoggingEvent event) {
    String pairs = super.convert(event);
    return pairs == null || pairs.isEmpty() ? "" : " " + Secrets.mask(pairs);
  }
}
