package dev.sluice.demo.enrolment;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.MessageProperties;
import dev.sluice.demo.VerificationTable;
import dev.sluice.mongodb.sequenced.Outcome;
import dev.sluice.mongodb.sequenced.SequencedSet;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.nio.charset.StandardCharsets;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.Document;

/**
 * {@code sluice demo --scenario enrolment}: seed 003 played for real. Enrol / unenrol messages
 * stamped with sequence numbers are published shuffled and with duplicates to the embedded AMQP
 * broker; several consumers (five by default), each on its own connection, apply them to MongoDB
 * with {@link SequencedSet} and no lock. Some acknowledgements are "lost" on purpose (the message
 * is requeued after its write), as when a consumer dies between writing and acknowledging. The
 * result is compared with applying the messages one by one in sequence order.
 *
 * <p>The first three sequence numbers are the seed's hard case: John (student 1, who has no other
 * messages) enrols in CS 101 (1), leaves (2), enrols again (3), published in the order 1, 3, 2.
 */
public final class EnrolmentDemo {
  static final String EXCHANGE = "school";
  static final String QUEUE = "enrolments";
  static final int JOHN = 1;
  static final String CS101 = "CS 101";

  /** Demo parameters. */
  /**
   * @param malformed extra messages the web application gets wrong (an unknown operation), to show
   *     that a consumer parks them with the cause instead of dropping them; any makes the run fail
   */
  public record Settings(int messages, int students, int classes, int duplicatePercent,
      int lostAckPercent, int consumers, int prefetch, int malformed, Duration timeout, long seed) {
    public Settings {
      if (messages < 10 || students < 1 || classes < 1 || duplicatePercent < 0 || lostAckPercent < 0
          || lostAckPercent > 50 || consumers < 1 || prefetch < 1 || malformed < 0 || timeout.isNegative()) {
        throw new IllegalArgumentException("need messages >= 10, students >= 1, classes >= 1,"
            + " duplicatePercent >= 0, 0 <= lostAckPercent <= 50, consumers >= 1, prefetch >= 1,"
            + " malformed >= 0; got " + this);
      }
    }

    public static Settings defaults() {
      return new Settings(2000, 50, 8, 20, 5, 5, 20, 0, Duration.ofSeconds(120), 3);
    }

    public Settings withMessages(int n) {
      return new Settings(n, students, classes, duplicatePercent, lostAckPercent, consumers, prefetch,
          malformed, timeout, seed);
    }

    public Settings withConsumers(int n) {
      return new Settings(messages, students, classes, duplicatePercent, lostAckPercent, n, prefetch,
          malformed, timeout, seed);
    }
  }

  /** What the verification found. */
  public record Result(int distinct, int duplicatesPublished, int deliveries, int requeuedAfterWrite,
      int applied, int superseded, int lateArrivals, int parked, int students, int differences,
      int naiveDifferences, long queueLeft, boolean johnInCs101, Map<String, Integer> perConsumer) {
    public boolean ok() {
      return differences == 0 && parked == 0 && queueLeft == 0 && johnInCs101;
    }
  }

  private record Arrival(EnrolmentMessage message, Outcome outcome) {}

  private final Settings settings;
  private final PrintStream out;
  private final ObjectMapper json = new ObjectMapper();

  public EnrolmentDemo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    Random random = new Random(settings.seed());
    List<EnrolmentMessage> history = history(random);
    List<EnrolmentMessage> publishOrder = publishOrder(history, random);

    List<Connection> connections = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start()) {
      out.printf("Embedded MongoDB at %s, embedded AMQP broker (Qpid) at %s%n", mongo.connectionString(),
          "localhost:" + broker.port());
      broker.declareQueue(EXCHANGE, QUEUE, "enrolment.#");
      publish(broker, publishOrder);
      publishMalformed(broker, settings.malformed());
      out.printf("Published %d messages (%d distinct, %d duplicates), shuffled; John's CS 101 messages in the"
          + " order 1, 3, 2%n", publishOrder.size(), history.size(), publishOrder.size() - history.size());

      MongoCollection<BsonDocument> students =
          client.getDatabase("school").getCollection("students", BsonDocument.class);
      MongoCollection<Document> rejected = client.getDatabase("school").getCollection("rejected_messages");
      SequencedSet classes = SequencedSet.of(students, "classes");

      ConcurrentLinkedQueue<Arrival> arrivals = new ConcurrentLinkedQueue<>();
      AtomicInteger parked = new AtomicInteger();
      AtomicInteger acked = new AtomicInteger();
      AtomicInteger deliveries = new AtomicInteger();
      AtomicInteger requeued = new AtomicInteger();
      Map<String, AtomicInteger> perConsumer = new TreeMap<>();
      CountDownLatch allAcked = new CountDownLatch(publishOrder.size() + settings.malformed());
      for (int i = 1; i <= settings.consumers(); i++) {
        String name = "consumer-" + i;
        AtomicInteger mine = new AtomicInteger();
        perConsumer.put(name, mine);
        Connection c = broker.connectionFactory().newConnection(name);
        connections.add(c);
        Channel ch = c.createChannel();
        ch.basicQos(settings.prefetch());
        ch.basicConsume(QUEUE, false, name, (tag, delivery) -> {
          deliveries.incrementAndGet();
          mine.incrementAndGet();
          long deliveryTag = delivery.getEnvelope().getDeliveryTag();
          EnrolmentMessage m;
          try {
            m = json.readValue(delivery.getBody(), EnrolmentMessage.class);
          } catch (JsonProcessingException e) {
            // Undecodable: retrying cannot help, dropping would lose it. Park it with the cause,
            // then acknowledge; if parking fails the exception requeues the message.
            rejected.insertOne(new Document("messageId", delivery.getProperties().getMessageId())
                .append("body", new String(delivery.getBody(), StandardCharsets.UTF_8))
                .append("consumer", name).append("error", e.getOriginalMessage()));
            out.printf("PARKED %s: %s: %s%n", name, describe(delivery), e.getOriginalMessage());
            ch.basicAck(deliveryTag, false);
            parked.incrementAndGet();
            allAcked.countDown();
            return;
          }
          Outcome outcome;
          try {
            outcome = apply(classes, m);
          } catch (RuntimeException e) {
            out.printf("RETRY %s: %s: %s%n", name, describe(delivery), e);
            ch.basicReject(deliveryTag, true); // the database failed: deliver it again
            return;
          }
          arrivals.add(new Arrival(m, outcome));
          if (!delivery.getEnvelope().isRedeliver()
              && ThreadLocalRandom.current().nextInt(100) < settings.lostAckPercent()) {
            requeued.incrementAndGet();
            ch.basicReject(deliveryTag, true); // written, but the broker will deliver it again
            return;
          }
          ch.basicAck(deliveryTag, false);
          acked.incrementAndGet();
          allAcked.countDown();
        }, consumerTag -> { });
      }
      out.printf("%d consumers started (prefetch %d each, %d%% of first deliveries requeued after the write)%n",
          settings.consumers(), settings.prefetch(), settings.lostAckPercent());

      long started = System.nanoTime();
      long deadline = started + settings.timeout().toNanos();
      while (!allAcked.await(1, TimeUnit.SECONDS)) {
        out.printf("[%3ds] acknowledged %d of %d, deliveries %d%n",
            TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started), acked.get(), publishOrder.size(),
            deliveries.get());
        if (System.nanoTime() > deadline) {
          break;
        }
      }
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      for (Connection c : connections) {
        c.close();
      }
      connections.clear();
      long left;
      try (Connection c = broker.connectionFactory().newConnection("verifier"); Channel ch = c.createChannel()) {
        AMQP.Queue.DeclareOk ok = ch.queueDeclarePassive(QUEUE);
        left = ok.getMessageCount();
      }
      out.printf("Consumed in %d ms; %d messages left in the queue%n", millis, left);

      Map<Integer, Set<String>> expected = inSequenceOrder(history);
      int differences = 0;
      for (var e : expected.entrySet()) {
        differences += symmetricDifference(e.getValue(), classes.members(new BsonInt32(e.getKey())));
      }
      List<Arrival> arrived = new ArrayList<>(arrivals);
      Result result = new Result(history.size(), publishOrder.size() - history.size(), deliveries.get(),
          requeued.get(),
          (int) arrived.stream().filter(a -> a.outcome() == Outcome.APPLIED).count(),
          (int) arrived.stream().filter(a -> a.outcome() == Outcome.SUPERSEDED).count(),
          lateArrivals(arrived), parked.get(), expected.size(), differences,
          naiveDifferences(arrived, expected), left,
          classes.members(new BsonInt32(JOHN)).contains(CS101),
          perConsumer.entrySet().stream().collect(TreeMap::new, (m, e) -> m.put(e.getKey(), e.getValue().get()),
              Map::putAll));
      printTable(result);
      return result;
    } finally {
      for (Connection c : connections) {
        try {
          c.close();
        } catch (Exception ignored) {
          // the broker is going away anyway
        }
      }
    }
  }

  private static Outcome apply(SequencedSet classes, EnrolmentMessage m) {
    BsonInt32 student = new BsonInt32(m.studentId());
    return m.enrol()
        ? classes.add(student, m.className(), m.sequenceNumber())
        : classes.remove(student, m.className(), m.sequenceNumber());
  }

  /** The web application's messages, in the order it stamped them. */
  private List<EnrolmentMessage> history(Random random) {
    List<EnrolmentMessage> h = new ArrayList<>();
    h.add(new EnrolmentMessage(EnrolmentMessage.ENROL, JOHN, CS101, 1));
    h.add(new EnrolmentMessage(EnrolmentMessage.UNENROL, JOHN, CS101, 2));
    h.add(new EnrolmentMessage(EnrolmentMessage.ENROL, JOHN, CS101, 3));
    for (long seq = 4; seq <= settings.messages(); seq++) {
      int student = JOHN + 1 + random.nextInt(settings.students()); // John has only the seed's three
      String className = "CS " + (101 + random.nextInt(settings.classes()));
      boolean enrol = random.nextInt(100) < 60;
      h.add(new EnrolmentMessage(enrol ? EnrolmentMessage.ENROL : EnrolmentMessage.UNENROL, student,
          className, seq));
    }
    return h;
  }

  /** Every message once, some twice, shuffled; John's three CS 101 messages in the order 1, 3, 2. */
  private List<EnrolmentMessage> publishOrder(List<EnrolmentMessage> history, Random random) {
    List<EnrolmentMessage> order = new ArrayList<>(history);
    int duplicates = history.size() * settings.duplicatePercent() / 100;
    for (int i = 0; i < duplicates; i++) {
      order.add(history.get(3 + random.nextInt(history.size() - 3)));
    }
    Collections.shuffle(order, random);
    List<Integer> slots = new ArrayList<>();
    for (int i = 0; i < order.size(); i++) {
      if (order.get(i).sequenceNumber() <= 3) {
        slots.add(i);
      }
    }
    order.set(slots.get(0), history.get(0));
    order.set(slots.get(1), history.get(2));
    order.set(slots.get(2), history.get(1));
    return order;
  }

  private void publish(EmbeddedAmqpBroker broker, List<EnrolmentMessage> messages) throws Exception {
    try (Connection c = broker.connectionFactory().newConnection("web-app"); Channel ch = c.createChannel()) {
      ch.confirmSelect();
      for (EnrolmentMessage m : messages) {
        AMQP.BasicProperties props = MessageProperties.PERSISTENT_TEXT_PLAIN.builder()
            .contentType("application/json").messageId("enrolment-" + m.sequenceNumber()).build();
        ch.basicPublish(EXCHANGE, "enrolment." + m.operation(), true, props, json.writeValueAsBytes(m));
      }
      ch.waitForConfirmsOrDie(30_000);
    }
  }

  private void publishMalformed(EmbeddedAmqpBroker broker, int n) throws Exception {
    if (n == 0) {
      return;
    }
    try (Connection c = broker.connectionFactory().newConnection("web-app"); Channel ch = c.createChannel()) {
      ch.confirmSelect();
      for (int i = 1; i <= n; i++) {
        AMQP.BasicProperties props = MessageProperties.PERSISTENT_TEXT_PLAIN.builder()
            .contentType("application/json").messageId("malformed-" + i).build();
        String body = "{\"operation\": \"enroll\", \"student_id\": " + (JOHN + 1)
            + ", \"class\": \"CS 101\", \"sequence_number\": " + (settings.messages() + i) + "}";
        ch.basicPublish(EXCHANGE, "enrolment.enroll", true, props, body.getBytes(StandardCharsets.UTF_8));
      }
      ch.waitForConfirmsOrDie(30_000);
    }
    out.printf("Published %d malformed messages (operation 'enroll')%n", n);
  }

  /** The reference: every message applied once, one after the other, in sequence order. */
  static Map<Integer, Set<String>> inSequenceOrder(List<EnrolmentMessage> history) {
    Map<Integer, Set<String>> state = new HashMap<>();
    history.stream().sorted((a, b) -> Long.compare(a.sequenceNumber(), b.sequenceNumber())).forEach(m -> {
      Set<String> s = state.computeIfAbsent(m.studentId(), k -> new TreeSet<>());
      if (m.enrol()) {
        s.add(m.className());
      } else {
        s.remove(m.className());
      }
    });
    return state;
  }

  /**
   * What a consumer without the sequence guard would have left: each (student, class) as set by
   * the last message to arrive (arrival order as recorded by the consumers).
   */
  private static int naiveDifferences(List<Arrival> arrived, Map<Integer, Set<String>> expected) {
    Map<Integer, Set<String>> naive = new HashMap<>();
    for (Arrival a : arrived) {
      Set<String> s = naive.computeIfAbsent(a.message().studentId(), k -> new TreeSet<>());
      if (a.message().enrol()) {
        s.add(a.message().className());
      } else {
        s.remove(a.message().className());
      }
    }
    int d = 0;
    for (var e : expected.entrySet()) {
      d += symmetricDifference(e.getValue(), naive.getOrDefault(e.getKey(), Set.of()));
    }
    return d;
  }

  /** Arrivals older than a message already arrived for the same student and class. */
  private static int lateArrivals(List<Arrival> arrived) {
    Map<String, Long> newest = new HashMap<>();
    int late = 0;
    for (Arrival a : arrived) {
      String key = a.message().studentId() + "/" + a.message().className();
      long seq = a.message().sequenceNumber();
      Long before = newest.get(key);
      if (before != null && before > seq) {
        late++;
      }
      newest.merge(key, seq, Math::max);
    }
    return late;
  }

  private static int symmetricDifference(Set<String> a, Set<String> b) {
    Set<String> onlyA = new TreeSet<>(a);
    onlyA.removeAll(b);
    Set<String> onlyB = new TreeSet<>(b);
    onlyB.removeAll(a);
    return onlyA.size() + onlyB.size();
  }

  private static String describe(Delivery d) {
    String body = new String(d.getBody(), StandardCharsets.UTF_8);
    return "message " + d.getProperties().getMessageId() + " " + (body.length() > 200 ? body.substring(0, 200) : body);
  }

  private void printTable(Result r) {
    VerificationTable table = new VerificationTable(out, 44, "value");
    table.row("distinct messages (sequence numbers)", r.distinct());
    table.row("duplicates published", r.duplicatesPublished());
    table.row("deliveries (incl. redeliveries)", r.deliveries());
    table.row("requeued after the write (lost ack)", r.requeuedAfterWrite());
    r.perConsumer().forEach((k, v) -> table.row("  deliveries to " + k, v));
    table.row("applied", r.applied());
    table.row("superseded (duplicate or older)", r.superseded());
    table.row("arrived after a newer one (same class)", r.lateArrivals());
    table.row("malformed messages parked (must be 0)", r.parked());
    table.row("messages left in the queue (must be 0)", (int) r.queueLeft());
    table.row("students checked", r.students());
    table.row("differences from sequence order (must be 0)", r.differences());
    table.row("  without the guard (last arrival wins)", r.naiveDifferences());
    table.row("John in CS 101 (1, 3, 2 case)", r.johnInCs101() ? "yes" : "NO");
    table.end();
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }
}
