package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The size of snapshot reads after timeouts and fast reads ({@code docs/adr/0085}). */
class ChunkSizingTest {
  private static final Duration BOUND = Duration.ofSeconds(10);

  @Test
  void aTimeoutHalvesTheNextReadDownToOneDocument() {
    ChunkSizing sizing = new ChunkSizing(1000, BOUND);
    assertThat(sizing.timedOut(1000)).isEqualTo(500);
    assertThat(sizing.timedOut(500)).isEqualTo(250);
    for (int i = 0; i < 20; i++) {
      sizing.timedOut(sizing.current());
    }
    assertThat(sizing.current()).isEqualTo(1);
  }

  @Test
  void aTimeoutOfAnOlderLargerReadDoesNotGrowTheSize() {
    ChunkSizing sizing = new ChunkSizing(1000, BOUND);
    sizing.timedOut(1000);
    sizing.timedOut(500);
    assertThat(sizing.timedOut(1000)).as("another partition's read of 1000 timed out late").isEqualTo(250);
  }

  @Test
  void fastReadsGrowItBackToTheConfiguredSizeAndNoFurther() {
    ChunkSizing sizing = new ChunkSizing(1000, BOUND);
    sizing.timedOut(1000);
    sizing.timedOut(500);
    sizing.read(250, BOUND.dividedBy(2));
    assertThat(sizing.current()).as("a read that took half the bound is not fast").isEqualTo(250);
    sizing.read(250, BOUND.dividedBy(5));
    assertThat(sizing.current()).isEqualTo(500);
    sizing.read(500, Duration.ofMillis(10));
    assertThat(sizing.current()).isEqualTo(1000);
    sizing.read(1000, Duration.ofMillis(10));
    assertThat(sizing.current()).as("never past the configured size").isEqualTo(1000);
  }

  @Test
  void withoutARoundTripBoundTheSizeStaysWhereTimeoutsPutIt() {
    ChunkSizing sizing = new ChunkSizing(100, null);
    sizing.timedOut(100);
    sizing.read(50, Duration.ZERO);
    assertThat(sizing.current()).isEqualTo(50);
  }
}
