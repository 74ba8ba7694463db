package dev.sluice.app.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Issue 12 item 5: long replays show progress, at most one line per interval, none for a short run. */
class ProgressLineTest {
  @Test
  void printsAtMostOneLinePerIntervalAndNoneBeforeTheFirstInterval() {
    StringWriter out = new StringWriter();
    AtomicLong now = new AtomicLong();
    ProgressLine line = new ProgressLine(new PrintWriter(out), 2000, now::get);
    line.update("a");
    now.set(1_999_000_000L);
    line.update("b");
    assertThat(out.toString()).as("a run shorter than the interval prints nothing").isEmpty();
    now.set(2_000_000_000L);
    line.update("c");
    now.set(3_000_000_000L);
    line.update("d");
    now.set(4_000_000_000L);
    line.update("e");
    assertThat(out.toString().lines()).containsExactly("c", "e");
  }
}
