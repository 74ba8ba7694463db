package dev.sluice.listener.internal;

import dev.sluice.feed.ChangeEvent;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Delivers a batch with up to {@code concurrency} changes handled at once (ADR 0069): never two of
 * one key at once, each key's changes in batch order. Runs on the partition's thread, which
 * dispatches to the worker's lanes and alone tells the {@link Checkpointer} what is processed: the
 * position of the newest change below which every change of the batch is handled or parked (the
 * watermark), so a checkpoint never covers a change still in a handler or not yet started.
 * It checkpoints by count as the sequential loop does, pipelined as it is (ADR 0073), while later
 * changes are in handlers.
 *
 * <p>When a delivery ends the tenure (lease lost, stop) or a checkpoint rewinds, nothing more is
 * started; the changes in handlers are waited for (as a close waits for the handler call in
 * progress), and the step is returned. A change after the watermark that was handled is delivered
 * again by whoever resumes from the checkpoint: at least once, as always.
 */
final class KeyedDelivery<D> {
  private final Tenure<D> tenure;
  private final Delivery<D> delivery;
  private final ExecutorService lanes;
  private final int concurrency;

  private record Done(int index, String key, Step step, Throwable error) {}

  KeyedDelivery(Tenure<D> tenure, Delivery<D> delivery, ExecutorService lanes, int concurrency) {
    this.tenure = tenure;
    this.delivery = delivery;
    this.lanes = lanes;
    this.concurrency = concurrency;
  }

  Step deliver(List<ChangeEvent<D>> batch) {
    PartitionWorker<D> worker = tenure.worker;
    int n = batch.size();
    // Each key's changes in batch order; keys ready to start, in order of their first change.
    Map<String, ArrayDeque<Integer>> byKey = new HashMap<>();
    ArrayDeque<String> ready = new ArrayDeque<>();
    for (int i = 0; i < n; i++) {
      String key = batch.get(i).key();
      ArrayDeque<Integer> queue = byKey.get(key);
      if (queue == null) {
        queue = new ArrayDeque<>();
        byKey.put(key, queue);
        ready.add(key);
      }
      queue.add(i);
    }
    boolean[] done = new boolean[n];
    int watermark = -1;
    BlockingQueue<Done> finished = new LinkedBlockingQueue<>();
    int inFlight = 0;
    Step step = Step.CONTINUE;
    Throwable error = null;
    while (true) {
      while (step == Step.CONTINUE && error == null && worker.running() && inFlight < concurrency
          && !ready.isEmpty()) {
        if (!tenure.keeper().isValid()) {
          step = Step.LOST;
          break;
        }
        String key = ready.poll();
        int index = byKey.get(key).poll();
        ChangeEvent<D> event = batch.get(index);
        worker.progress().delivering(event.position());
        inFlight++;
        lanes.execute(() -> {
          try {
            finished.add(new Done(index, key, delivery.deliver(event), null));
          } catch (Throwable t) {
            finished.add(new Done(index, key, null, t));
          }
        });
      }
      if (inFlight == 0) {
        break;
      }
      Done d = take(finished);
      inFlight--;
      if (d.error() != null) {
        error = error == null ? d.error() : error;
        continue;
      }
      if (d.step() != Step.CONTINUE) {
        step = step == Step.CONTINUE ? d.step() : step;
        continue;
      }
      done[d.index()] = true;
      if (!byKey.get(d.key()).isEmpty()) {
        ready.add(d.key());
      }
      int before = watermark;
      while (watermark + 1 < n && done[watermark + 1]) {
        watermark++;
      }
      if (watermark > before) {
        tenure.checkpointer.processed(batch.get(watermark).position(), watermark - before);
        worker.progress().processedTo(tenure.checkpointer.lastProcessed());
        if (step == Step.CONTINUE && error == null && tenure.checkpointer.dueByCount()) {
          // As the sequential loop: ask for a flush and go on; wait only past flushesInFlight.
          step = tenure.checkpointer.changesDue();
        }
      }
    }
    if (error instanceof RuntimeException e) {
      throw e;
    }
    if (error instanceof Error e) {
      throw e;
    }
    if (error != null) {
      throw new IllegalStateException(error);
    }
    return step;
  }

  /**
   * Waits for the next handled change. Interrupts do not end the wait (as everywhere in the
   * partition's loop: only a stop does, and the changes in handlers are waited for then too).
   */
  private static Done take(BlockingQueue<Done> finished) {
    while (true) {
      try {
        return finished.take();
      } catch (InterruptedException e) {
        // ignored, see above
      }
    }
  }
}
