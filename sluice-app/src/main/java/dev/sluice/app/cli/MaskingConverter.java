package dev.sluice.app.cli;

import ch.qos.logback.classic.pattern.MessageConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;

/** The log message with connection-string passwords masked ({@link Secrets}); used as {@code %maskedMsg}. */
public final class MaskingConverter extends MessageConverter {
  @Override
  public String convert(ILoggingEvent event) {
    return Secrets.mask(super.convert(event));
  }
}
