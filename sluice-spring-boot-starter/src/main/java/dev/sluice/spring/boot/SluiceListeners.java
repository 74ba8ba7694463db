package dev.sluice.spring.boot;

import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The listeners of this application context, by name, for the health indicator, the {@code sluice}
 * endpoint and the application itself. Filled once every singleton exists (the listeners are built
 * then, and started with the context).
 */
public final class SluiceListeners {
  private final Map<String, SluiceListenerContainer> containers =
      Collections.synchronizedMap(new LinkedHashMap<>());

  void add(SluiceListenerContainer container) {
    containers.put(container.name(), container);
  }

  /** Every listener, in declaration order (properties first, then annotated methods). */
  public Collection<SluiceListenerContainer> all() {
    synchronized (containers) {
      return java.util.List.copyOf(containers.values());
    }
  }

  /** The listener named {@code name}, if declared. */
  public Optional<SluiceListenerContainer> get(String name) {
    return Optional.ofNullable(containers.get(name));
  }
}
