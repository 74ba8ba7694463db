package dev.sluice.kafka.connect;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.connect.source.SourceTaskContext;
import org.apache.kafka.connect.storage.OffsetStorageReader;

/**
 * A source task started by a test without a Connect worker: its context hands out {@code config}
 * and reads offsets from {@code offsets} (empty: none committed yet), as a worker's offset store would.
 */
final class StandaloneTask {
  private StandaloneTask() {}

  static SluiceSourceTask start(Map<String, String> config, Map<Map<String, Object>, Map<String, Object>> offsets) {
    SluiceSourceTask task = new SluiceSourceTask();
    task.initialize(new SourceTaskContext() {
      @Override
      public Map<String, String> configs() {
        return config;
      }

      @Override
      public OffsetStorageReader offsetStorageReader() {
        return new OffsetStorageReader() {
          @Override
          public <T> Map<String, Object> offset(Map<String, T> partition) {
            return offsets.get(new HashMap<String, Object>(partition));
          }

          @Override
          public <T> Map<Map<String, T>, Map<String, Object>> offsets(Collection<Map<String, T>> partitions) {
            Map<Map<String, T>, Map<String, Object>> out = new HashMap<>();
            for (Map<String, T> p : partitions) {
              out.put(p, offsets.get(new HashMap<String, Object>(p)));
            }
            return out;
          }
        };
      }
    });
    task.start(config);
    return task;
  }
}
