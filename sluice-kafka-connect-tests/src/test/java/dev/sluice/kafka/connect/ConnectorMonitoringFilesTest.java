package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.mongodb.client.MongoCollection;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/**
 * The connector's monitoring files (the plugin's {@code monitoring/}): the JMX exporter rules map
 * every metric a running task registers, and the Grafana dashboard and the Prometheus alert rules
 * name only series and labels those rules make of them; a name that is not exported makes an empty
 * panel or an alert that never fires, silently.
 *
 * <p>The exporter itself is not on this build's class path: {@link #export} applies its rules as
 * its documentation describes (a rule's {@code pattern} is a Java regular expression, unanchored,
 * matched against {@code domain<key=value, ...><>attribute: value}, with the MBean's keys in the
 * order of its name; {@code $n} in {@code name} and label values is the pattern's group n).
 */
class ConnectorMonitoringFilesTest {
  private static final Path DIRECTORY = Path.of(System.getProperty("sluice.connect.monitoring",
      "../sluice-kafka-connect/src/main/plugin/monitoring"));
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  /** Labels Prometheus adds to every series it scrapes. */
  private static final Set<String> TARGET_LABELS = Set.of("instance", "job");
  private static final Pattern METRIC = Pattern.compile("\\b(sluice_connect_[a-z0-9_]+)\\b");
  private static final Pattern SELECTOR = Pattern.compile("\\b(sluice_connect_[a-z0-9_]+)\\s*\\{([^}]*)}");
  private static final Pattern MATCHER = Pattern.compile("(\\w+)\\s*(=~|!~|!=|=)");
  private static final Pattern GROUPING = Pattern.compile("\\b(?:by|without)\\s*\\(([^)]*)\\)");
  private static final Pattern LABEL_VALUES = Pattern.compile("label_values\\((sluice_connect_[a-z0-9_]+),\\s*(\\w+)\\)");
  /** Not mapped on purpose: Prometheus computes rates from the counter. */
  private static final Set<String> UNMAPPED = Set.of("changes-rate");

  @Test
  void theDashboardAndTheRulesNameOnlySeriesTheExporterMakesOfARunningTasksMetrics() throws Exception {
    EmbeddedKafka kafka = SharedServers.kafka();
    InMemoryMongo mongo = SharedServers.mongo();
    String db = mongo.freshDatabase().getName();
    mongo.client().getDatabase(db).createCollection("orders");
    MongoCollection<Document> orders = mongo.client().getDatabase(db).getCollection("orders");
    try (ConnectCluster cluster = new ConnectCluster(kafka.bootstrapServers(), "monitoring", false)) {
      cluster.startWorker();
      cluster.putConnector("monitored", ConnectCluster.connector(mongo.uri(), db, "orders", 2, 2));
      await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("monitored", 2));
      for (int i = 0; i < 3; i++) {
        orders.insertOne(new Document("_id", "k" + i));
      }
      await().atMost(Duration.ofSeconds(60))
          .until(() -> KeyedWrites.keys(kafka.bootstrapServers(), "sluice." + db + ".orders").size() == 3);

      MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
      ObjectName query = new ObjectName(TaskMetrics.DOMAIN + ":type=source-task-metrics,connector=monitored,*");
      await().atMost(Duration.ofSeconds(30)).until(() -> jmx.queryNames(query, null).size() == 2);
      List<String> attributes = new ArrayList<>();
      for (ObjectName bean : jmx.queryNames(query, null)) {
        assertThat(bean.getKeyPropertyListString()).as("key order of the task MBean")
            .matches("type=source-task-metrics,connector=monitored,task=\\d");
        for (MBeanAttributeInfo a : jmx.getMBeanInfo(bean).getAttributes()) {
          attributes.add(exporterName(bean, a.getName(), jmx.getAttribute(bean, a.getName())));
        }
      }
      assertThat(attributes).hasSize(12); // six metrics, two tasks

      Map<String, Set<String>> exported = export(YAML.readTree(DIRECTORY.resolve("jmx-exporter.yaml").toFile()),
          attributes);
      assertThat(exported).containsOnlyKeys("sluice_connect_task_changes_total", "sluice_connect_task_heartbeats_total",
          "sluice_connect_task_parked_total", "sluice_connect_task_history_lost_total", "sluice_connect_task_lag_seconds");
      exported.values().forEach(labels -> assertThat(labels).containsExactlyInAnyOrder("connector", "task"));
      assertExported(queries(), exported);
    }
  }

  /**
   * A task's MBean names the connector before the task, as Connect's own task MBeans do, in every
   * JVM: with the tags in a {@code Map.of} the order changed from one JVM to the next (its
   * iteration order is salted per JVM), and the exporter's patterns matched only some workers.
   */
  @Test
  void aTasksMBeanNamesTheConnectorBeforeTheTask() throws Exception {
    try (TaskMetrics metrics = new TaskMetrics("order-check", 3, () -> 0L)) {
      Set<ObjectName> beans = ManagementFactory.getPlatformMBeanServer()
          .queryNames(new ObjectName(TaskMetrics.DOMAIN + ":type=source-task-metrics,connector=order-check,*"), null);
      assertThat(beans).singleElement().extracting(ObjectName::getKeyPropertyListString)
          .isEqualTo("type=source-task-metrics,connector=order-check,task=3");
    }
  }

  @Test
  void theCheckFindsAnAttributeNoRuleMapsAndAMetricOrLabelNotExported() throws Exception {
    JsonNode rules = YAML.readTree("""
        rules:
          - pattern: 'sluice.connect<type=source-task-metrics, connector=(.+), task=(\\d+)><>parked-total'
            name: sluice_connect_task_parked_total
            labels: {connector: "$1", task: "$2"}
        """);
    String parked = "sluice.connect<type=source-task-metrics, connector=c, task=0><>parked-total: 0.0";
    assertThat(export(rules, List.of(parked))).containsEntry("sluice_connect_task_parked_total", Set.of("connector", "task"));
    assertThatThrownBy(() -> export(rules, List.of(parked,
        "sluice.connect<type=source-task-metrics, connector=c, task=0><>lag-ms: 0.0")))
        .hasMessageContaining("lag-ms");
    assertThatThrownBy(() -> export(rules, List.of(parked.replace("connector=c, task=0", "task=0, connector=c"))))
        .hasMessageContaining("parked-total");
    Map<String, Set<String>> exported = Map.of("sluice_connect_task_parked_total", Set.of("connector", "task"));
    assertExported(List.of("sum by (connector) (increase(sluice_connect_task_parked_total[10m]))"), exported);
    assertThatThrownBy(() -> assertExported(List.of("sluice_connect_task_parkd_total"), exported))
        .hasMessageContaining("sluice_connect_task_parkd_total is not exported");
    assertThatThrownBy(() -> assertExported(List.of("sum by (partition) (sluice_connect_task_parked_total)"), exported))
        .hasMessageContaining("has no label 'partition'");
    assertThatThrownBy(() -> assertExported(List.of("sluice_connect_task_parked_total{conector=\"x\"}"), exported))
        .hasMessageContaining("has no label 'conector'");
  }

  /** The string the JMX exporter matches its rules against, for one attribute of {@code bean}. */
  private static String exporterName(ObjectName bean, String attribute, Object value) {
    return bean.getDomain() + "<" + bean.getKeyPropertyListString().replace(",", ", ") + "><>" + attribute + ": "
        + value;
  }

  /**
   * The series (name and label names) {@code config}'s rules make of {@code attributes}; fails
   * naming an attribute no rule maps (but {@link #UNMAPPED}) and a rule that maps none.
   */
  private static Map<String, Set<String>> export(JsonNode config, List<String> attributes) {
    Map<String, Set<String>> series = new HashMap<>();
    Set<String> usedRules = new HashSet<>();
    List<String> unmapped = new ArrayList<>();
    for (String attribute : attributes) {
      boolean mapped = false;
      for (JsonNode rule : config.path("rules")) {
        Matcher m = Pattern.compile(rule.path("pattern").asText()).matcher(attribute);
        if (!m.find()) {
          continue;
        }
        mapped = true;
        usedRules.add(rule.path("pattern").asText());
        String name = substitute(rule.path("name").asText(), m);
        Set<String> labels = series.computeIfAbsent(config.path("lowercaseOutputName").asBoolean() ? name.toLowerCase()
            : name, k -> new HashSet<>());
        rule.path("labels").fieldNames().forEachRemaining(labels::add);
        break; // the exporter uses the first rule that matches
      }
      if (!mapped && UNMAPPED.stream().noneMatch(u -> attribute.contains("><>" + u + ":"))) {
        unmapped.add(attribute);
      }
    }
    List<String> unused = new ArrayList<>();
    config.path("rules").forEach(r -> {
      if (!usedRules.contains(r.path("pattern").asText())) {
        unused.add(r.path("pattern").asText());
      }
    });
    assertThat(unmapped).as("task metrics no exporter rule maps").isEmpty();
    assertThat(unused).as("exporter rules that match no task metric").isEmpty();
    return series;
  }

  private static String substitute(String template, Matcher m) {
    Matcher ref = Pattern.compile("\\$(\\d)").matcher(template);
    StringBuilder out = new StringBuilder();
    while (ref.find()) {
      ref.appendReplacement(out, Matcher.quoteReplacement(m.group(Integer.parseInt(ref.group(1)))));
    }
    return ref.appendTail(out).toString();
  }

  /** Every query of the alert rules and the dashboard (expressions, panel targets, variables). */
  private static List<String> queries() throws Exception {
    List<String> queries = new ArrayList<>();
    for (JsonNode group : YAML.readTree(DIRECTORY.resolve("prometheus-rules.yaml").toFile()).path("groups")) {
      for (JsonNode rule : group.path("rules")) {
        assertThat(rule.path("alert").asText()).startsWith("SluiceConnect");
        assertThat(rule.path("labels").path("severity").asText()).isIn("warning", "critical");
        assertThat(rule.path("annotations").path("summary").asText()).isNotBlank();
        queries.add(rule.path("expr").asText());
      }
    }
    JsonNode dashboard = new ObjectMapper().readTree(DIRECTORY.resolve("grafana-dashboard.json").toFile());
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
    assertThat(queries).hasSizeGreaterThanOrEqualTo(9); // 3 alerts, 5 panels, 1 variable
    return queries;
  }

  /** Fails naming each query's metric that is not exported and each label its metric does not carry. */
  private static void assertExported(List<String> queries, Map<String, Set<String>> exported) {
    List<String> problems = new ArrayList<>();
    for (String query : queries) {
      Set<String> metrics = new HashSet<>();
      Matcher m = METRIC.matcher(query);
      while (m.find()) {
        metrics.add(m.group(1));
      }
      assertThat(metrics).as("Sluice connector metrics in: %s", query).isNotEmpty();
      metrics.stream().filter(x -> !exported.containsKey(x))
          .forEach(x -> problems.add(x + " is not exported (in: " + query + ")"));
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
          metrics.forEach(metric -> requireLabel(exported, metric, label.strip(), query, problems));
        }
      }
      Matcher values = LABEL_VALUES.matcher(query);
      while (values.find()) {
        requireLabel(exported, values.group(1), values.group(2), query, problems);
      }
    }
    assertThat(problems).as("what the dashboard and the alert rules ask of the exported series").isEmpty();
  }

  private static void requireLabel(Map<String, Set<String>> exported, String metric, String label, String query,
      List<String> problems) {
    if (!label.isEmpty() && !TARGET_LABELS.contains(label) && exported.containsKey(metric)
        && !exported.get(metric).contains(label)) {
      problems.add(metric + " has no label '" + label + "' (it has " + exported.get(metric) + "; in: " + query + ")");
    }
  }
}
