package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * One setting of a {@link Listener}: its name, type, default, rule and one line of documentation,
 * described once in {@link ListenerSettings} and translated by every front-end (the service's YAML
 * file, the Spring Boot starter's properties, the Kafka Connect connector's keys), so that a
 * front-end neither re-declares a default nor words a rule its own way (ADR 0116).
 *
 * @param name the name in the listener's terms, as the service's YAML file spells it ({@code
 *     leaseDuration}, {@code checkpoint.every}); Spring's relaxed binding spells the same in
 *     kebab case ({@code lease-duration})
 * @param type the Java type of a value
 * @param defaultValue the value when none is given, or null when the default is derived from other
 *     settings (then {@code doc} says how)
 * @param rule which values are accepted ({@code null} is never tested: it means "not given")
 * @param ruleText what {@code rule} requires, worded to follow the setting's name ({@code must be
 *     in [1, 4096]})
 * @param doc one line of documentation, default included
 */
public record Setting<T>(String name, Class<T> type, T defaultValue, Predicate<? super T> rule, String ruleText,
    String doc) {

  public Setting {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(rule, "rule");
    Objects.requireNonNull(ruleText, "ruleText");
    Objects.requireNonNull(doc, "doc");
    if (defaultValue != null && !rule.test(defaultValue)) {
      throw new IllegalArgumentException(name + ": the default " + defaultValue + " breaks the rule " + ruleText);
    }
  }

  /** Whether {@code value} is accepted; null (not given) always is. */
  public boolean accepts(T value) {
    return value == null || rule.test(value);
  }

  /**
   * What is wrong with {@code value} ({@code must be in [1, 4096], but was 0}; text is quoted: {@code
   * but was 'yesterday'}), or null when accepted.
   */
  public String problem(T value) {
    return accepts(value) ? null : ruleText + ", but was " + (value instanceof String ? "'" + value + "'" : value);
  }

  /**
   * {@code value}, or the default when it is null.
   *
   * @throws ConfigurationException naming {@code path} when the rule refuses {@code value}
   */
  public T check(T value, String path) {
    String problem = problem(value);
    if (problem != null) {
      throw new ConfigurationException(path + " " + problem);
    }
    return value == null ? defaultValue : value;
  }

  /** {@code value}, or the default when it is null; unchecked. */
  public T orDefault(T value) {
    return value == null ? defaultValue : value;
  }
}
