package dev.sluice.app.service.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.sluice.ConfigurationException;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerSettings;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.listener.Setting;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.sink.Publication;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * Reads and validates a YAML configuration. Every problem is reported with the path of the value
 * ({@code listeners[0].checkpoint.every}); unknown keys are errors, not silently ignored.
 */
public final class ConfigLoader {
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory())
      .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
      .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
      // partitions: 1.9 is an error, not 1; a key given twice is an error, not the last value
      .disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT)
      .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

  /** What Kafka accepts as a topic name. */
  private static final java.util.regex.Pattern KAFKA_TOPIC = java.util.regex.Pattern.compile("[a-zA-Z0-9._-]{1,249}");
  /** A configuration file is a few kilobytes: anything past this is a mistake, refused before it is parsed. */
  static final int MAX_FILE_BYTES = 1024 * 1024;

  private ConfigLoader() {}

  /** {@code host:port} as the Kafka client parses a bootstrap address, with a port from 1 to 65535. */
  static boolean isHostAndPort(String address) {
    String host = org.apache.kafka.common.utils.Utils.getHost(address);
    Integer port = org.apache.kafka.common.utils.Utils.getPort(address);
    return host != null && !host.isBlank() && port != null && port >= 1 && port <= 65535;
  }

  /** What the AMQP client itself accepts as a URI ({@code ConnectionFactory.setUri}). */
  static boolean isAmqpUri(String uri) {
    try {
      com.rabbitmq.client.ConnectionFactory f = new com.rabbitmq.client.ConnectionFactory();
      f.setUri(uri.strip());
      // setUri keeps any port number; a socket takes 1 to 65535 only
      return f.getPort() >= 1 && f.getPort() <= 65535;
    } catch (java.net.URISyntaxException | java.security.GeneralSecurityException | IllegalArgumentException e) {
      return false;
    }
  }

  public static SluiceConfig load(Path file) {
    String text;
    try {
      long size = Files.size(file);
      if (size > MAX_FILE_BYTES) {
        throw new ConfigurationException("Configuration file " + file + " is " + size + " bytes; a configuration"
            + " file is at most " + MAX_FILE_BYTES + " bytes");
      }
      text = Files.readString(file);
    } catch (NoSuchFileException e) {
      throw new ConfigurationException("Configuration file " + file + " does not exist");
    } catch (IOException e) {
      throw new ConfigurationException("Cannot read configuration file " + file + ": " + e.getMessage());
    }
    return parse(text, file.toString());
  }

  public static SluiceConfig parse(String yaml, String source) {
    return parse(yaml, source, System::getenv);
  }

  /**
   * Parses {@code yaml} after replacing {@code ${NAME}} by the environment variable {@code NAME}
   * and {@code ${NAME:-default}} by it or, when it is unset or empty, by {@code default}.
   *
   * @param env the environment ({@code System::getenv} outside tests)
   */
  public static SluiceConfig parse(String yaml, String source, Function<String, String> env) {
    if (yaml == null || yaml.isBlank()) {
      throw new ConfigException(source, "the file is empty");
    }
    if (yaml.length() > MAX_FILE_BYTES) {
      throw new ConfigException(source, "is " + yaml.length() + " characters; a configuration file is at most "
          + MAX_FILE_BYTES);
    }
    String text = substitute(yaml, source, env);
    SluiceConfig config;
    try {
      config = YAML.readValue(text, SluiceConfig.class);
    } catch (UnrecognizedPropertyException e) {
      String path = path(e);
      String known = e.getKnownPropertyIds() == null ? "" : e.getKnownPropertyIds().stream().map(String::valueOf).sorted()
          .collect(Collectors.joining(", "));
      String guess = closest(e.getPropertyName(), e.getKnownPropertyIds());
      throw new ConfigException(where(source, text, e) + path, "unknown key '" + e.getPropertyName() + "'"
          + (guess == null ? "" : "; did you mean '" + guess + "'?") + (known.isEmpty() ? "" : " Known keys here: " + known));
    } catch (MismatchedInputException e) {
      String path = path(e);
      String problem = e.getMessage().contains("Duplicate field")
          ? e.getOriginalMessage().split("\n")[0]
          : "expected " + expected(e.getTargetType());
      throw new ConfigException(where(source, text, e) + (path.isEmpty() ? "(top level)" : path), problem);
    } catch (JsonMappingException e) {
      if (e.getCause() instanceof com.fasterxml.jackson.core.JsonParseException parse) {
        throw notYaml(source, parse);
      }
      String path = path(e);
      throw new ConfigException(where(source, text, e) + (path.isEmpty() ? "(top level)" : path),
          e.getOriginalMessage().replaceAll(" \\(class [^)]*\\)", "").split("\n")[0]);
    } catch (JsonProcessingException e) {
      throw notYaml(source, e);
    }
    if (config == null) {
      throw new ConfigException(source, "the file is empty");
    }
    validate(config, source);
    return config;
  }

  private static final Pattern VARIABLE = Pattern.compile("\\$\\{([^}:]*)(?::-([^}]*))?}");

  /** {@code ${NAME}} and {@code ${NAME:-default}} replaced; an unset variable without default is an error. */
  static String substitute(String yaml, String source, Function<String, String> env) {
    Matcher m = VARIABLE.matcher(yaml);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String name = m.group(1);
      int line = (int) yaml.substring(0, m.start()).chars().filter(c -> c == '\n').count() + 1;
      int column = m.start() - yaml.lastIndexOf('\n', m.start() - 1);
      String at = source + ":" + line + ":" + column;
      if (!name.matches("[A-Za-z_][A-Za-z0-9_]*")) {
        throw new ConfigException(at, "'" + m.group() + "' is not a variable reference: use ${NAME} or ${NAME:-default}"
            + " with a name of letters, digits and '_'");
      }
      String value = env.apply(name);
      if (value == null || (value.isEmpty() && m.group(2) != null)) {
        value = m.group(2);
      }
      if (value == null) {
        throw new ConfigException(at, "environment variable " + name + " is not set (give a default with ${"
            + name + ":-default})");
      }
      m.appendReplacement(out, Matcher.quoteReplacement(value));
    }
    m.appendTail(out);
    return out.toString();
  }

  private static String path(JsonMappingException e) {
    return e.getPath().stream()
        .map(r -> r.getFieldName() != null ? "." + r.getFieldName() : "[" + r.getIndex() + "]")
        .collect(Collectors.joining()).replaceFirst("^\\.", "");
  }

  /** A file that is not YAML: where the scanner stopped and what it found there. */
  private static ConfigException notYaml(String source, JsonProcessingException e) {
    if (e.getCause() instanceof org.yaml.snakeyaml.error.MarkedYAMLException y && y.getProblemMark() != null) {
      String what = (y.getContext() == null ? "" : y.getContext() + ": ") + y.getProblem();
      return new ConfigException(source + ":" + (y.getProblemMark().getLine() + 1) + ":" + (y.getProblemMark().getColumn() + 1),
          "not valid YAML: " + what.replace('\n', ' '));
    }
    return new ConfigException(where(source, e).replaceFirst(": $", ""), "not valid YAML: " + e.getOriginalMessage().split("\n")[0]);
  }

  /** What a value of {@code type} looks like, in the file's terms. */
  private static String expected(Class<?> type) {
    if (type == null) {
      return "another kind of value";
    }
    if (type == Integer.class || type == int.class || type == Long.class || type == long.class) {
      return "a whole number";
    }
    if (type == Boolean.class || type == boolean.class) {
      return "true or false";
    }
    if (type == String.class) {
      return "a single value (text), not a list or a section";
    }
    if (java.util.Collection.class.isAssignableFrom(type)) {
      return "a list (lines starting with '- ')";
    }
    return "a section of keys (key: value), not a single value or a list";
  }

  /**
   * {@code file:line:column: } of the key a mapping error is about. Jackson reports where it
   * noticed the problem, which for sections read as records can be lines later (the end of the
   * section); the key's own position is found by reading the file again up to it.
   */
  private static String where(String source, String text, JsonMappingException e) {
    String pointer = e.getPath().stream()
        .map(r -> r.getFieldName() != null ? "/" + r.getFieldName().replace("~", "~0").replace("/", "~1") : "/" + r.getIndex())
        .collect(Collectors.joining());
    if (!pointer.isEmpty()) {
      try (com.fasterxml.jackson.core.JsonParser p = YAML.getFactory().createParser(text)) {
        for (com.fasterxml.jackson.core.JsonToken t = p.nextToken(); t != null; t = p.nextToken()) {
          if (t == com.fasterxml.jackson.core.JsonToken.FIELD_NAME
              && p.getParsingContext().pathAsPointer().toString().equals(pointer)) {
            return source + ":" + p.currentTokenLocation().getLineNr() + ":" + p.currentTokenLocation().getColumnNr() + ": ";
          }
        }
      } catch (IOException | RuntimeException ignored) {
        // The file could not be read again as far as the key: use where Jackson noticed it.
      }
    }
    return where(source, e);
  }

  /** {@code file:line:column: } of a parse error, or {@code file: } when Jackson knows no location. */
  private static String where(String source, JsonProcessingException e) {
    return e.getLocation() == null || e.getLocation().getLineNr() < 1
        ? source + ": "
        : source + ":" + e.getLocation().getLineNr() + ":" + e.getLocation().getColumnNr() + ": ";
  }

  /** The known key closest to {@code key} (at most two edits away, or a different case), or null. */
  static String closest(String key, java.util.Collection<Object> known) {
    if (key == null || known == null) {
      return null;
    }
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (Object k : known) {
      String candidate = String.valueOf(k);
      int d = candidate.equalsIgnoreCase(key) ? 0 : editDistance(key.toLowerCase(Locale.ROOT), candidate.toLowerCase(Locale.ROOT));
      if (d < bestDistance) {
        bestDistance = d;
        best = candidate;
      }
    }
    return bestDistance <= Math.max(1, Math.min(2, key.length() / 3)) ? best : null;
  }

  /** Levenshtein distance: insertions, deletions and substitutions. */
  private static int editDistance(String a, String b) {
    int[] previous = new int[b.length() + 1];
    int[] current = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      previous[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      current[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
        current[j] = Math.min(substitution, Math.min(previous[j] + 1, current[j - 1] + 1));
      }
      int[] swap = previous;
      previous = current;
      current = swap;
    }
    return previous[b.length()];
  }

  private static final Pattern PG_IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}");
  private static final Pattern PG_TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}\\.[A-Za-z_][A-Za-z0-9_$]{0,62}");

  private static void validate(SluiceConfig c, String source) {
    require(c.mongodb() == null || c.postgres() == null, source + ": mongodb and postgres",
        "are both set: configure exactly one source (mongodb: a MongoDB deployment, postgres: a PostgreSQL publication)");
    require(c.mongodb() != null || c.postgres() != null, source + ": mongodb or postgres",
        "is required: configure exactly one source (mongodb: a MongoDB deployment, postgres: a PostgreSQL publication)");
    if (c.mongodb() != null) {
      validateMongo(c.mongodb(), source);
    } else {
      validatePostgres(c.postgres(), source);
    }
    require(c.listeners() != null && !c.listeners().isEmpty(), source + ": listeners", "must list at least one listener");
    SluiceConfig.HttpSection http = c.httpOrDefault();
    require(http.portOrDefault() >= 0 && http.portOrDefault() <= 65535, source + ": http.port",
        "must be between 0 (any free port) and 65535, but was " + http.portOrDefault());
    require(notBlank(http.host()), source + ": http.address", "must be an address to bind to, such as 127.0.0.1 or 0.0.0.0");
    require(http.host().matches("[0-9A-Za-z.:\\-\\[\\]%]+"), source + ": http.address",
        "must be an IP address or host name, but was '" + http.host() + "'");
    for (int i = 0; i < c.listeners().size(); i++) {
      ListenerSection l = c.listeners().get(i);
      String at = source + ": listeners[" + i + "]";
      require(l != null, at, "is empty");
      validateTarget(c, l, at);
      partitions(l, at);
      setting(ListenerSettings.THREADS, l.threads(), at);
      concurrency(l, at);
      require(l.sink() != null, at + ".sink", "is required (kafka or amqp)");
      int sinks = (l.sink().kafka() != null ? 1 : 0) + (l.sink().amqp() != null ? 1 : 0);
      require(sinks == 1, at + ".sink", "must configure exactly one of kafka, amqp, but had " + sinks);
      if (l.sink().kafka() != null) {
        require(notBlank(l.sink().kafka().bootstrapServers()), at + ".sink.kafka.bootstrapServers", "is required");
        require(java.util.Arrays.stream(l.sink().kafka().bootstrapServers().split(",")).map(String::strip)
                .allMatch(ConfigLoader::isHostAndPort), at + ".sink.kafka.bootstrapServers",
            "must be host:port[,host:port...] with ports from 1 to 65535, but was '"
                + l.sink().kafka().bootstrapServers() + "'");
        require(notBlank(l.sink().kafka().topic()), at + ".sink.kafka.topic", "is required");
        String topic = l.sink().kafka().topic();
        require(KAFKA_TOPIC.matcher(topic).matches() && !topic.equals(".") && !topic.equals(".."),
            at + ".sink.kafka.topic", "must be a Kafka topic name: 1 to 249 of a-z, A-Z, 0-9, '.', '_', '-', but was '"
                + topic + "'");
      }
      if (l.sink().amqp() != null) {
        require(notBlank(l.sink().amqp().uri()), at + ".sink.amqp.uri", "is required (amqp://...)");
        require(isAmqpUri(l.sink().amqp().uri()), at + ".sink.amqp.uri",
            "must be amqp://[user:password@]host[:port][/vhost] or amqps://..., but was '"
                + dev.sluice.app.cli.Secrets.mask(l.sink().amqp().uri()) + "'");
        require(notBlank(l.sink().amqp().exchange()), at + ".sink.amqp.exchange", "is required");
      }
      publication(l, at); // parses and checks the publish section
      // Building the policies validates them and names the value.
      leaseDuration(l, at);
      renewInterval(l, at);
      acquireInterval(l, at);
      pollWait(l, at);
      checkpoint(l, at);
      validateBootstrap(c, l, at);
      historyLost(l, at);
      onInvalidate(l, at);
      retry(l, at);
      parks(l, at);
      String legacy = lower(l.legacyCheckpoints());
      require(legacy == null || legacy.equals("refuse") || legacy.equals("ignore"), at + ".legacyCheckpoints",
          "must be refuse (default) or ignore, but was '" + l.legacyCheckpoints() + "'");
      group(l, at);
    }
    // Two entries of one (collection, group) would share leases and checkpoints, each getting
    // only part of the changes: refuse, naming both.
    Map<String, Integer> seen = new HashMap<>();
    for (int i = 0; i < c.listeners().size(); i++) {
      ListenerSection l = c.listeners().get(i);
      String group = group(l, source + ": listeners[" + i + "]");
      Integer first = seen.putIfAbsent(l.target() + "\u0000" + group, i);
      if (first != null) {
        throw new ConfigException(source + ": listeners[" + first + "] and listeners[" + i + "]",
            "both read " + (c.mongodb() != null ? "collection" : "table") + " '" + l.target() + "' as consumer group '"
                + group + "': they would"
                + " share leases and checkpoints and each get only part of the changes. Give one of them"
                + " another 'group' (each group gets every change)");
      }
    }
    if (c.postgres() != null) {
      refuseSharedSlots(c, source);
    }
  }

  /**
   * Two entries whose group and table differ only in characters a replication slot's name cannot
   * hold ({@code idx.v1} and {@code idx_v1}) would read through the same slots: refused, naming both.
   */
  private static void refuseSharedSlots(SluiceConfig c, String source) {
    Map<String, Integer> slots = new HashMap<>();
    for (int i = 0; i < c.listeners().size(); i++) {
      ListenerSection l = c.listeners().get(i);
      String group = group(l, source + ": listeners[" + i + "]");
      String slot = (group + "_" + l.target()).toLowerCase(java.util.Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
      Integer first = slots.putIfAbsent(slot, i);
      if (first != null) {
        ListenerSection other = c.listeners().get(first);
        throw new ConfigException(source + ": listeners[" + first + "] and listeners[" + i + "]",
            "group '" + group(other, source) + "' on " + other.target() + " and group '" + group + "' on "
                + l.target() + " map to the same replication slots (" + slot + "_<i>of<n>: a slot name keeps only"
                + " a-z, 0-9 and '_'); give one of them a group that differs in a letter or digit");
      }
    }
  }

  private static void validateMongo(SluiceConfig.MongoSection m, String source) {
    require(notBlank(m.uri()), source + ": mongodb.uri", "is required (mongodb://...)");
    require(m.uri().startsWith("mongodb://") || m.uri().startsWith("mongodb+srv://"),
        source + ": mongodb.uri", "must start with mongodb:// or mongodb+srv://, but was '"
            + dev.sluice.app.cli.Secrets.mask(m.uri()) + "'");
    try {
      new com.mongodb.ConnectionString(m.uri().strip());
    } catch (IllegalArgumentException e) {
      throw new ConfigException(source + ": mongodb.uri", "is not a valid MongoDB connection string: "
          + dev.sluice.app.cli.Secrets.mask(String.valueOf(e.getMessage())) + " (was '"
          + dev.sluice.app.cli.Secrets.mask(m.uri()) + "')");
    }
    require(notBlank(m.database()), source + ": mongodb.database", "is required");
    require(m.database().matches("[^/\\\\. \"$*<>:|?\u0000]{1,63}"), source + ": mongodb.database",
        "must be a MongoDB database name (at most 63 characters, none of / \\\\ . space \" $ * < > : | ?), but was '"
            + m.database() + "'");
    for (String[] c : new String[][] {{"leaseCollection", m.leaseCollection()},
        {"deadLetterCollection", m.deadLetterCollection()}}) {
      require(c[1] == null || (!c[1].isBlank() && !c[1].contains("$") && !c[1].contains("\u0000")
          && !c[1].startsWith("system.")), source + ": mongodb." + c[0],
          "must be a collection name (not empty, without '$' or NUL, not starting with 'system.'), or left out"
              + " for the default, but was '" + c[1] + "'");
    }
  }

  /**
   * The port of a one-host {@code jdbc:postgresql://host:port/...} URL, or null (none given, or
   * not of that form: the driver's own parse judges it). Checked first because the driver refuses
   * an out-of-range port without saying so, and prints a warning of its own on standard error.
   */
  private static Integer pgPort(String url) {
    if (!url.startsWith("jdbc:postgresql://")) {
      return null;
    }
    try {
      int port = new java.net.URI(url.substring("jdbc:".length())).getPort();
      return port < 0 ? null : port;
    } catch (java.net.URISyntaxException e) {
      return null;
    }
  }

  private static void validatePostgres(SluiceConfig.PostgresSection p, String source) {
    require(notBlank(p.url()), source + ": postgres.url", "is required (jdbc:postgresql://host:5432/database)");
    String url = p.url().trim();
    Integer port = pgPort(url);
    require(port == null || (port >= 1 && port <= 65535), source + ": postgres.url", "port " + port
        + " is out of range: ports go from 1 to 65535, in '" + dev.sluice.app.cli.Secrets.mask(url) + "'");
    boolean parses;
    try {
      parses = url.startsWith("jdbc:postgresql:") && org.postgresql.Driver.parseURL(url, null) != null;
    } catch (RuntimeException e) {
      parses = false;
    }
    require(parses, source + ": postgres.url", "must be a PostgreSQL JDBC URL such as"
        + " jdbc:postgresql://db:5432/shop, but was '" + dev.sluice.app.cli.Secrets.mask(url) + "'");
    require(notBlank(p.user()), source + ": postgres.user", "is required: a user with the REPLICATION attribute");
    require(notBlank(p.publication()), source + ": postgres.publication",
        "is required: the publication the listeners read (CREATE PUBLICATION name FOR TABLE ...)");
    require(PG_IDENTIFIER.matcher(p.publication()).matches(), source + ": postgres.publication",
        "must be a PostgreSQL identifier (letters, digits, '_', '$'; 63 characters at most), but was '"
            + p.publication() + "'");
    require(p.leaseTable() == null || p.leaseTable().matches("[A-Za-z_][A-Za-z0-9_]{0,62}(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?"),
        source + ": postgres.leaseTable", "must be an unquoted SQL identifier, optionally schema-qualified, but was '"
            + p.leaseTable() + "'");
    require(p.deadLetterTable() == null || p.deadLetterTable().matches("[A-Za-z_][A-Za-z0-9_]{0,62}"),
        source + ": postgres.deadLetterTable", "must be a plain SQL identifier (no schema), but was '"
            + p.deadLetterTable() + "'");
    sessionLiveness(p, source);
  }

  /**
   * {@code postgres.sessionLiveness} of the file {@code source}, or null when not set or
   * {@code off}: the lease store's session-liveness bound (ADR 0114), between 100 ms and 1 hour.
   */
  public static Duration sessionLiveness(SluiceConfig.PostgresSection p, String source) {
    String path = source + ": postgres.sessionLiveness";
    String text = p.sessionLiveness();
    Duration bound = text == null || text.trim().equalsIgnoreCase("off") ? null : Durations.parse(text, path);
    require(bound == null || bound.compareTo(Duration.ofMillis(100)) >= 0 && bound.compareTo(Duration.ofHours(1)) <= 0,
        path, "must be off or between 100ms and 1h (a crashed holder's partitions are taken about that long"
            + " after its crash), but was '" + p.sessionLiveness() + "'");
    return bound;
  }

  /**
   * The collection (MongoDB) or table (PostgreSQL) of entry {@code l}: the one the source needs,
   * and not the other's.
   */
  private static void validateTarget(SluiceConfig c, ListenerSection l, String at) {
    if (c.mongodb() != null) {
      require(l.table() == null, at + ".table", "is for a postgres source; with mongodb name the collection"
          + " (collection: orders)");
      require(l.messages() == null, at + ".messages", "is for a postgres source (logical-decoding messages);"
          + " a mongodb source has none");
      require(notBlank(l.collection()), at + ".collection", "is required");
      // MongoDB refuses '$' and NUL in a collection name and keeps system.* for itself; '#'
      // separates the stream from the partition in Sluice's lease names.
      require(!l.collection().contains("$") && !l.collection().contains("\u0000") && !l.collection().contains("#")
              && !l.collection().startsWith("system."), at + ".collection",
          "must be a collection name without '$', '#' or NUL, not starting with 'system.', but was '"
              + l.collection() + "'");
      return;
    }
    require(l.collection() == null, at + ".collection", "is for a mongodb source; with postgres name the table"
        + " (table: schema.table, e.g. table: public.orders)");
    require(notBlank(l.table()), at + ".table", "is required with postgres: the table relayed, as schema.table"
        + " (e.g. public.orders)");
    require(PG_TABLE.matcher(l.table()).matches(), at + ".table",
        "must be schema.table (e.g. public.orders), unquoted identifiers, but was '" + l.table() + "'");
    require(l.onInvalidate() == null, at + ".onInvalidate",
        "is for a mongodb source (collection dropped or renamed); a postgres source has no such setting");
    require(l.messagePrefixes().stream().noneMatch(String::isEmpty), at + ".messages",
        "must be message prefixes separated by commas, none empty, but was '" + l.messages() + "'");
  }

  /** Whether the source can start where {@code bootstrap} says, with a message naming the choices. */
  private static void validateBootstrap(SluiceConfig c, ListenerSection l, String at) {
    StartPoint start = bootstrap(l, at).startPoint();
    if (c.mongodb() == null) {
      require(!(start instanceof StartPoint.AtTime), at + ".bootstrap",
          "a time ('" + l.bootstrap() + "') is not supported by a postgres source (the WAL is not indexed by time);"
              + " use oldest, latest or snapshot");
    }
  }

  /**
   * The consumer group of a listener entry: {@code group} if set, else derived from its sink
   * ({@code kafka-<topic>}, {@code amqp-<exchange>}), so two entries relaying one collection to
   * different destinations are different consumers without being told.
   */
  public static String group(ListenerSection l, String at) {
    if (l.group() != null) {
      return setting(ListenerSettings.GROUP, l.group(), at);
    }
    String derived = l.sink().kafka() != null ? "kafka-" + l.sink().kafka().topic()
        : "amqp-" + l.sink().amqp().exchange();
    derived = derived.replaceAll("[^A-Za-z0-9._-]", "_");
    require(ListenerSettings.GROUP.accepts(derived), at + ".group",
        "is not set, and the name derived from the sink ('" + derived + "') " + ListenerSettings.GROUP.ruleText()
            + "; set it explicitly");
    return derived;
  }

  /** Whether lease records from before consumer groups may be ignored ({@code legacyCheckpoints}). */
  public static boolean ignoreLegacyCheckpoints(ListenerSection l) {
    return "ignore".equals(lower(l.legacyCheckpoints()));
  }

  public static int partitions(ListenerSection l, String at) {
    return setting(ListenerSettings.PARTITIONS, l.partitions(), at);
  }

  public static int concurrency(ListenerSection l, String at) {
    return setting(ListenerSettings.CONCURRENCY, l.concurrency(), at);
  }

  public static Duration leaseDuration(ListenerSection l, String at) {
    return duration(ListenerSettings.LEASE_DURATION, l.leaseDuration(), at);
  }

  /** The renew interval, or null for the listener's default (a third of the lease). */
  public static Duration renewInterval(ListenerSection l, String at) {
    return duration(ListenerSettings.RENEW_INTERVAL, l.renewInterval(), at);
  }

  /** The acquire interval, or null for the listener's default (the renew interval). */
  public static Duration acquireInterval(ListenerSection l, String at) {
    return duration(ListenerSettings.ACQUIRE_INTERVAL, l.acquireInterval(), at);
  }

  /** The poll wait, or null for the listener's default. */
  public static Duration pollWait(ListenerSection l, String at) {
    return duration(ListenerSettings.POLL_WAIT, l.pollWait(), at);
  }

  /**
   * The checkpoint policy; a value the policy refuses is reported under {@code checkpoint} with the
   * policy's own names ({@code maxChanges} for {@code every}).
   */
  public static CheckpointPolicy checkpoint(ListenerSection l, String at) {
    SluiceConfig.CheckpointSection c = l.checkpoint() == null
        ? new SluiceConfig.CheckpointSection(null, null, null, null) : l.checkpoint();
    Duration maxDelay = Durations.parse(c.maxDelay(), at + ".checkpoint.maxDelay");
    Duration heartbeat = Durations.parse(c.heartbeat(), at + ".checkpoint.heartbeat");
    try {
      return new CheckpointPolicy(ListenerSettings.CHECKPOINT_EVERY.orDefault(c.every()),
          ListenerSettings.CHECKPOINT_MAX_DELAY.orDefault(maxDelay),
          ListenerSettings.CHECKPOINT_HEARTBEAT.orDefault(heartbeat),
          ListenerSettings.CHECKPOINT_FLUSHES_IN_FLIGHT.orDefault(c.flushesInFlight()));
    } catch (ConfigurationException e) {
      throw new ConfigException(at + ".checkpoint", e.getMessage());
    }
  }

  public static BootstrapPolicy bootstrap(ListenerSection l, String at) {
    setting(ListenerSettings.BOOTSTRAP, l.bootstrap(), at);
    return ListenerSettings.bootstrap(l.bootstrap(), at + ".bootstrap");
  }

  public static HistoryLostPolicy historyLost(ListenerSection l, String at) {
    setting(ListenerSettings.ON_HISTORY_LOST, l.onHistoryLost(), at);
    return ListenerSettings.historyLost(l.onHistoryLost(), at + ".onHistoryLost");
  }

  /**
   * What a listener's sink publishes, parsed once for validation and wiring alike: changes (no
   * publish section) or domain events.
   */
  public static Publication publication(ListenerSection l, String at) {
    SluiceConfig.PublishSection p = l.sink() == null ? null : l.sink().publish();
    if (p == null) {
      return Publication.changes();
    }
    String mode = lower(p.mode());
    require(mode != null, at + ".sink.publish.mode", "is required: changes or domain-events");
    if (mode.equals("changes")) {
      require(p.field() == null && p.idField() == null && p.onMissing() == null, at + ".sink.publish",
          "field, idField and onMissing are for mode domain-events, but the mode is changes");
      return Publication.changes();
    }
    require(mode.equals("domain-events"), at + ".sink.publish.mode",
        "must be changes or domain-events, but was '" + p.mode() + "'");
    require(notBlank(p.field()), at + ".sink.publish.field", "is required for domain-events");
    String onMissing = lower(p.onMissing());
    require(onMissing == null || onMissing.equals("count") || onMissing.equals("park"),
        at + ".sink.publish.onMissing", "must be count or park, but was '" + p.onMissing() + "'");
    return Publication.domainEvents(p.field().trim(), notBlank(p.idField()) ? p.idField().trim() : "id",
        "park".equals(onMissing) ? Publication.MissingEvent.PARK : Publication.MissingEvent.COUNT);
  }

  /** Whether the listener parks failing changes ({@code onFailure: park}) rather than blocking; default block. */
  public static boolean parks(ListenerSection l, String at) {
    setting(ListenerSettings.ON_FAILURE, l.onFailure(), at);
    return ListenerSettings.parks(l.onFailure(), at + ".onFailure");
  }

  /** What the listener does when its collection is dropped, renamed or replaced; default stop. */
  public static MongoChangeFeed.OnInvalidate onInvalidate(ListenerSection l, String at) {
    String v = lower(l.onInvalidate());
    if (v == null || v.equals("stop")) {
      return MongoChangeFeed.OnInvalidate.STOP;
    }
    if (v.equals("start-after")) {
      return MongoChangeFeed.OnInvalidate.START_AFTER;
    }
    throw new ConfigException(at + ".onInvalidate", "must be stop or start-after, but was '" + l.onInvalidate() + "'");
  }

  public static RetryPolicy retry(ListenerSection l, String at) {
    SluiceConfig.RetrySection r = l.retry() == null ? new SluiceConfig.RetrySection(null, null, null) : l.retry();
    Duration initial = Durations.parse(r.initialDelay(), at + ".retry.initialDelay");
    Duration max = Durations.parse(r.maxDelay(), at + ".retry.maxDelay");
    try {
      return RetryPolicy.attempts(ListenerSettings.RETRY_ATTEMPTS.orDefault(r.attempts()),
          ListenerSettings.RETRY_INITIAL_DELAY.orDefault(initial), ListenerSettings.RETRY_MAX_DELAY.orDefault(max));
    } catch (ConfigurationException e) {
      throw new ConfigException(at + ".retry", e.getMessage());
    }
  }

  /**
   * {@code value} of {@code setting} in entry {@code at} (its default when not given), or a {@link
   * ConfigException} naming the path ({@code listeners[0].partitions}) with the setting's rule.
   */
  private static <T> T setting(Setting<T> setting, T value, String at) {
    require(setting.accepts(value), at + "." + setting.name(), setting.problem(value));
    return setting.orDefault(value);
  }

  private static Duration duration(Setting<Duration> setting, String text, String at) {
    return setting(setting, Durations.parse(text, at + "." + setting.name()), at);
  }

  private static String lower(String s) {
    return s == null ? null : s.trim().toLowerCase(Locale.ROOT);
  }

  private static boolean notBlank(String s) {
    return s != null && !s.isBlank();
  }

  private static void require(boolean ok, String path, String problem) {
    if (!ok) {
      throw new ConfigException(path, problem);
    }
  }

}
