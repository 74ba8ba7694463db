package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Grafana dashboard and the Prometheus rules shipped in the distribution
 * ({@code src/dist/monitoring}), read as Prometheus would read their queries, and checked against
 * what a running service exports on {@code /metrics}: a metric or a label that is not exported
 * makes an empty panel or an alert that never fires, silently.
 */
final class MonitoringFiles {
  static final Path DIRECTORY = Path.of("src", "dist", "monitoring");
  static final Path RULES = DIRECTORY.resolve("prometheus-rules.yaml");
  static final Path DASHBOARD = DIRECTORY.resolve("grafana-dashboard.json");
  /** Labels Prometheus adds to every series it scrapes; never on /metrics itself. */
  private static final Set<String> TARGET_LABELS = Set.of("instance", "job");
  private static final Pattern METRIC = Pattern.compile("\\b(sluice_[a-z0-9_]+)\\b");
  private static final Pattern SELECTOR = Pattern.compile("\\b(sluice_[a-z0-9_]+)\\s*\\{([^}]*)}");
  private static final Pattern MATCHER = Pattern.compile("(\\w+)\\s*(=~|!~|!=|=)");
  private static final Pattern GROUPING = Pattern.compile("\\b(?:by|without)\\s*\\(([^)]*)\\)");
  private static final Pattern LABEL_VALUES = Pattern.compile("label_values\\((sluice_[a-z0-9_]+),\\s*(\\w+)\\)");

  private MonitoringFiles() {
  }

  /** Every query of the rules and the dashboard (alert expressions, panel targets, variables). */
  static List<String> queries() throws IOException {
    List<String> queries = new ArrayList<>();
    JsonNode rules = new ObjectMapper(new YAMLFactory()).readTree(RULES.toFile());
    for (JsonNode group : rules.path("groups")) {
      for (JsonNode rule : group.path("rules")) {
        queries.add(rule.path("expr").asText());
      }
    }
    JsonNode dashboard = new ObjectMapper().readTree(DASHBOARD.toFile());
    for (JsonNode panel : dashboard.path("panels")) {
      for (JsonNode target : panel.path("targets")) {
        queries.add(target.path("expr").asText());
      }
    }
    for (JsonNode variable : dashboard.path("templating").path("list")) {
      if (variable.path("type").asText().equals("query")) {
        queries.add(variable.path("query").asText());
      }
    }
    return queries;
  }

  /** The metrics of a Prometheus text exposition, each with the labels it is exported with. */
  static Map<String, Set<String>> exported(String scrape) {
    Map<String, Set<String>> metrics = new HashMap<>();
    Pattern sample = Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)})?\\s+\\S+.*$");
    for (String line : scrape.split("\n")) {
      if (line.startsWith("#") || line.isBlank()) {
        continue;
      }
      Matcher m = sample.matcher(line);
      if (!m.matches()) {
        continue;
      }
      Set<String> labels = metrics.computeIfAbsent(m.group(1), k -> new HashSet<>());
      if (m.group(2) != null) {
        Matcher label = Pattern.compile("(\\w+)=\"").matcher(m.group(2));
        while (label.find()) {
          labels.add(label.group(1));
        }
      }
    }
    return metrics;
  }

  /**
   * Fails naming each query whose Sluice metric {@code scrape} does not export, or that selects or
   * groups by a label that metric does not carry. Only metrics {@code applies} accepts are checked
   * (a MongoDB service exports no replication-slot gauges).
   */
  static void assertExported(List<String> queries, String scrape, Predicate<String> applies) {
    Map<String, Set<String>> exported = exported(scrape);
    List<String> problems = new ArrayList<>();
    int checked = 0;
    for (String query : queries) {
      Set<String> metrics = new HashSet<>();
      Matcher m = METRIC.matcher(query);
      while (m.find()) {
        metrics.add(m.group(1));
      }
      metrics.removeIf(applies.negate());
      if (metrics.isEmpty()) {
        continue;
      }
      checked++;
      for (String metric : metrics) {
        if (!exported.containsKey(metric)) {
          problems.add(metric + " is not exported (in: " + query + ")");
        }
      }
      Matcher selector = SELECTOR.matcher(query);
      while (selector.find()) {
        Matcher label = MATCHER.matcher(selector.group(2));
        while (label.find()) {
          requireLabel(exported, selector.group(1), label.group(1), query, problems);
        }
      }
      Matcher grouping = GROUPING.matcher(query);
      while (grouping.find()) {
        for (String label : grouping.group(1).split(",")) {
          for (String metric : metrics) {
            requireLabel(exported, metric, label.strip(), query, problems);
          }
        }
      }
      Matcher values = LABEL_VALUES.matcher(query);
      while (values.find()) {
        requireLabel(exported, values.group(1), values.group(2), query, problems);
      }
    }
    assertThat(checked).as("queries that name a Sluice metric").isPositive();
    assertThat(problems).as("what the dashboard and the rules ask of /metrics").isEmpty();
  }

  private static void requireLabel(Map<String, Set<String>> exported, String metric, String label, String query,
      List<String> problems) {
    if (label.isEmpty() || TARGET_LABELS.contains(label) || !exported.containsKey(metric)) {
      return;
    }
    if (!exported.get(metric).contains(label)) {
      problems.add(metric + " has no label '" + label + "' (it has " + exported.get(metric) + "; in: " + query + ")");
    }
  }
}
