package dev.sluice.app.service.config;

import dev.sluice.ConfigurationException;

/** A configuration file was rejected; the message names the file path of the bad value. */
public final class ConfigException extends ConfigurationException {
  private static final long serialVersionUID = 1L;

  public ConfigException(String path, String problem) {
    super(path + ": " + problem);
  }
}
