package dev.sluice;

/** A configuration value was rejected. The message names the parameter and the value. */
public class ConfigurationException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public ConfigurationException(String message) {
    super(message);
  }

  /** Throws if {@code condition} is false, naming {@code parameter} and {@code value}. */
  public static void require(boolean condition, String parameter, Object value, String rule) {
    if (!condition) {
      throw new ConfigurationException(parameter + " " + rule + ", but was " + value);
    }
  }

  /** Throws if {@code value} is null, naming {@code parameter}. */
  public static <T> T requireNonNull(T value, String parameter) {
    if (value == null) {
      throw new ConfigurationException(parameter + " must not be null");
    }
    return value;
  }
}
