package dev.sluice.mongodb.view;

import dev.sluice.ConfigurationException;
import java.util.List;

/** Validation of declared names, and escaping of free text used as a BSON field name. */
final class ViewNames {
  /** The sub-document of every target document holding the guards (ADR 0031). */
  static final String META = "_sluice";

  private ViewNames() {}

  static String collection(String name, String parameter) {
    ConfigurationException.requireNonNull(name, parameter);
    ConfigurationException.require(
        !name.isBlank() && !name.contains("$") && !name.startsWith("system."),
        parameter,
        "'" + name + "'",
        "must be a valid collection name");
    return name;
  }

  static String field(String name, String parameter) {
    ConfigurationException.requireNonNull(name, parameter);
    ConfigurationException.require(
        !name.isEmpty()
            && !name.contains(".")
            && !name.startsWith("$")
            && !name.equals("_id")
            && !name.equals(META),
        parameter,
        "'" + name + "'",
        "must be a top-level field name other than _id and " + META + " (no '.', no leading '$')");
    return name;
  }

  /** {@code names} as a list, each checked as by {@link #field}. */
  static List<String> fields(String[] names, String parameter) {
    for (String name : names) {
      field(name, parameter);
    }
    return List.of(names);
  }

  /** Percent-escapes '%', '.' and '$' so that a lease or collection name is one field name. */
  static String escape(String text) {
    return text.replace("%", "%25").replace(".", "%2E").replace("$", "%24");
  }
}
