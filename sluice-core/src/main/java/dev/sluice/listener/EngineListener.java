package dev.sluice.listener;

import dev.sluice.listener.internal.ListenerEngine;
import java.util.List;

/**
 * The {@link Listener} users hold, on the engine that runs it ({@code listener/internal}). The
 * engine does not know this type: the dependency points one way, from the API to the engine.
 */
final class EngineListener<D> implements Listener<D> {
  private final ListenerEngine<D> engine;

  EngineListener(ListenerEngine<D> engine) {
    this.engine = engine;
  }

  @Override
  public Listener<D> start() {
    engine.start();
    return this;
  }

  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String owner() {
    return engine.owner();
  }

  @Override
  public List<PartitionStatus> status() {
    return engine.status();
  }

  @Override
  public ListenerConfig<D> config() {
    return engine.config();
  }
}
