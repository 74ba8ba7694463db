package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.postgresql.replication.LogSequenceNumber;

/** {@link PgPosition#lsnText} writes every LSN as pgjdbc does, the oracle here, and as PostgreSQL's {@code pg_lsn}. */
class PgLsnTextTest {
  @Property(tries = 5000)
  void writesEveryLsnAsPgjdbcDoes(@ForAll long lsn) {
    assertThat(PgPosition.lsnText(lsn)).isEqualTo(LogSequenceNumber.valueOf(lsn).asString());
  }

  @Example
  void theEdges() {
    for (long lsn : new long[] {0L, 1L, 0xFL, 0x10L, 0xFFFFFFFFL, 0x1_0000_0000L, 0x16_B374_D848L, -1L, Long.MIN_VALUE,
        Long.MAX_VALUE, 0x8000_0000L, 0x0000_0001_8000_0000L}) {
      assertThat(PgPosition.lsnText(lsn)).as("%x", lsn).isEqualTo(LogSequenceNumber.valueOf(lsn).asString());
    }
    assertThat(PgPosition.lsnText(0x16_B374_D848L)).isEqualTo("16/B374D848");
    assertThat(PgPosition.lsnText(0L)).isEqualTo("0/0");
  }
}
