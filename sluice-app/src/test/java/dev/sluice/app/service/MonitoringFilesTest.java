package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The shipped dashboard and rules are well formed, and the check that runs them against a service's
 * {@code /metrics} ({@link MonitoringFiles#assertExported}, called by {@code HttpEndpointTest} on a
 * MongoDB source and {@code PostgresSourceServiceTest} on a PostgreSQL one) does catch a wrong
 * metric or label.
 */
class MonitoringFilesTest {

  @Test
  void everyRuleHasAnAlertAnExpressionASeverityAndASummary() throws Exception {
    JsonNode groups = new ObjectMapper(new YAMLFactory()).readTree(MonitoringFiles.RULES.toFile()).path("groups");
    assertThat(groups).isNotEmpty();
    int rules = 0;
    for (JsonNode group : groups) {
      for (JsonNode rule : group.path("rules")) {
        rules++;
        assertThat(rule.path("alert").asText()).as("alert name of %s", rule).startsWith("Sluice");
        assertThat(rule.path("expr").asText()).as("expr of %s", rule.path("alert")).contains("sluice_");
        assertThat(rule.path("labels").path("severity").asText()).as("severity of %s", rule.path("alert"))
            .isIn("warning", "critical");
        assertThat(rule.path("annotations").path("summary").asText()).as("summary of %s", rule.path("alert"))
            .isNotBlank();
      }
    }
    assertThat(rules).isGreaterThanOrEqualTo(8);
  }

  @Test
  void theDashboardCoversWhatAnOperatorWatches() throws Exception {
    JsonNode dashboard = new ObjectMapper().readTree(MonitoringFiles.DASHBOARD.toFile());
    assertThat(dashboard.path("uid").asText()).isEqualTo("sluice-service");
    String queries = String.join("\n", MonitoringFiles.queries());
    assertThat(queries).contains("sluice_partition_state", "sluice_partition_active", "sluice_partition_lag_seconds",
        "sluice_partition_history_seconds", "sluice_changes_parked_total", "sluice_leases_lost_total",
        "sluice_pg_slot_retained_bytes", "sluice_changes_delivered_total", "sluice_flush_duration_seconds");
  }

  @Test
  void theCheckFindsAMetricOrALabelTheServiceDoesNotExport() {
    String scrape = """
        # TYPE sluice_partition_active gauge
        sluice_partition_active{lease="g/s#0of1"} 1.0
        sluice_changes_parked_total{group="g",stream="s"} 0.0
        """;
    MonitoringFiles.assertExported(List.of("max by (lease) (sluice_partition_active) < 1",
        "sum by (group, stream) (increase(sluice_changes_parked_total[10m])) > 0"), scrape, m -> true);
    assertThatThrownBy(() -> MonitoringFiles.assertExported(List.of("max by (lease) (sluice_partition_activ) < 1"),
        scrape, m -> true)).hasMessageContaining("sluice_partition_activ is not exported");
    assertThatThrownBy(() -> MonitoringFiles.assertExported(List.of("max by (slot) (sluice_partition_active) < 1"),
        scrape, m -> true)).hasMessageContaining("sluice_partition_active has no label 'slot'");
    assertThatThrownBy(() -> MonitoringFiles.assertExported(
        List.of("sum(sluice_changes_parked_total{strem=\"s\"})"), scrape, m -> true))
        .hasMessageContaining("has no label 'strem'");
  }
}
