package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Text forms the feed's own sessions never produce (it sets {@code bytea_output = hex}), but a
 * snapshot or a server configured otherwise may: the conversions read them too. The texts are the
 * server's own, as the PostgreSQL manual gives them; {@link PostgresTypeCorpusTest} compares the
 * rest with a real server.
 */
class PgValuesTest {
  @Test
  void byteaInTheEscapeFormatIsReadAsTheServerWroteIt() {
    // SELECT '\x00ff5c27'::bytea with bytea_output = escape
    assertThat((byte[]) PgValues.convert(PgValues.BYTEA, "\\000\\377\\\\'")).containsExactly(0x00, 0xff, 0x5c, 0x27);
    assertThat((byte[]) PgValues.convert(PgValues.BYTEA, "")).isEmpty();
    assertThatThrownBy(() -> PgValues.convert(PgValues.BYTEA, "\\9"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("three octal digits");
  }

  @Test
  void datesAndTimestampsBeforeTheCommonEraAfter9999AndWithOffsetsInSeconds() {
    assertThat(PgValues.convert(PgValues.DATE, "0044-03-15 BC")).isEqualTo(LocalDate.of(-43, 3, 15));
    assertThat(PgValues.convert(PgValues.DATE, "0001-01-01 BC")).isEqualTo(LocalDate.of(0, 1, 1));
    assertThat(PgValues.convert(PgValues.DATE, "294276-12-31")).isEqualTo(LocalDate.of(294276, 12, 31));
    assertThat(PgValues.convert(PgValues.TIMESTAMP_TYPE, "10000-01-01 00:00:00.5"))
        .isEqualTo(LocalDateTime.of(10000, 1, 1, 0, 0, 0, 500_000_000));
    assertThat(PgValues.convert(PgValues.TIMESTAMPTZ, "1800-06-01 12:17:30+00:17:30"))
        .isEqualTo(OffsetDateTime.of(1800, 6, 1, 12, 17, 30, 0, ZoneOffset.ofHoursMinutesSeconds(0, 17, 30)));
    assertThat(PgValues.convert(PgValues.TIMESTAMPTZ, "2026-11-25 10:15:30.123456-03:30"))
        .isEqualTo(OffsetDateTime.of(2026, 11, 25, 10, 15, 30, 123_456_000, ZoneOffset.ofHoursMinutes(-3, -30)));
    assertThat(PgValues.convert(PgValues.TIME, "24:00:00")).isEqualTo("24:00:00");
    assertThatThrownBy(() -> PgValues.convert(PgValues.DATE, "2026-02-30")).isInstanceOf(RuntimeException.class);
  }

  @Test
  void arraysOfEveryDimensionBecomeNestedLists() {
    assertThat(PgValues.convert(1007, "{{1,2},{3,NULL}}")).isEqualTo(List.of(List.of(1, 2), Arrays.asList(3, null)));
    assertThat(PgValues.convert(1009, "{\"a,b\",\"c\\\"d\",NULL,\"NULL\",\"\"}"))
        .isEqualTo(Arrays.asList("a,b", "c\"d", null, "NULL", ""));
    assertThat(PgValues.convert(1007, "{}")).isEqualTo(List.of());
    assertThat(PgValues.convert(1007, "[0:1]={1,2}")).as("explicit bounds: the text").isEqualTo("[0:1]={1,2}");
  }

  @Test
  void theNewlyTypedValuesSurviveTheDeadLetterTextForm() {
    java.util.Map<String, Object> row = new java.util.LinkedHashMap<>();
    row.put("bc", PgValues.convert(PgValues.DATE, "0044-03-15 BC"));
    row.put("far", PgValues.convert(PgValues.TIMESTAMP_TYPE, "10000-01-01 00:00:00"));
    row.put("lmt", PgValues.convert(PgValues.TIMESTAMPTZ, "1800-06-01 12:17:30+00:17:30"));
    row.put("grid", PgValues.convert(1007, "{{1,2},{3,NULL}}"));
    row.put("end", PgValues.convert(PgValues.TIME, "24:00:00"));
    assertThat(PostgresDocuments.decode(PostgresDocuments.encode(row))).isEqualTo(row);
    assertThat(PostgresDocuments.toJson(row).toString()).isEqualTo("{\"bc\":\"-0043-03-15\",\"far\":"
        + "\"+10000-01-01T00:00\",\"lmt\":\"1800-06-01T12:17:30+00:17:30\",\"grid\":[[1,2],[3,null]],"
        + "\"end\":\"24:00:00\"}");
  }
}
