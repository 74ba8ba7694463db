package dev.sluice.listener.internal;

import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionStatus;
import java.util.List;

/** The engine: being written; see the lease loop and feed loop in this package. */
public final class ListenerEngine<D> implements Listener<D> {
  private final ListenerConfig<D> config;

  public ListenerEngine(ListenerConfig<D> config) {
    this.config = config;
  }

  @Override
  public Listener<D> start() {
    throw new UnsupportedOperationException("engine not yet written");
  }

  @Override
  public void close() {}

  @Override
  public String owner() {
    return config.owner();
  }

  @Override
  public List<PartitionStatus> status() {
    return List.of();
  }

  @Override
  public ListenerConfig<D> config() {
    return config;
  }
}
