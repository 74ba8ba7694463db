package dev.sluice.app.demo.views;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.sluice.mongodb.sequenced.Outcome;
import dev.sluice.mongodb.sequenced.SequencedSet;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonString;

/**
 * The enrolment demo (seed 003): enrol/unenrol messages stamped with sequence numbers are
 * published to an embedded AMQP broker shuffled and partly duplicated; five consumers apply them
 * at once with {@link SequencedSet}, without any lock. At the end every student's classes are
 * compared with applying the messages in sequence order.
 */
public final class EnrolmentDemo {
  private static final int CONSUMERS = 5;

  /** Demo parameters. */
  public record Settings(int messages, int students, int duplicatePercent) {}

  /** What the verification found. */
  public record Result(int published, int applied, int superseded, int students, int differences) {
    public boolean ok() {
      return differences == 0 && applied + superseded == published;
    }
  }

  private record Msg(String student, String course, boolean enrol, long seq) {
    byte[] encode() {
      return (student + "|" + course + "|" + (enrol ? "enrol" : "unenrol") + "|" + seq)
          .getBytes(StandardCharsets.UTF_8);
    }

    static Msg decode(byte[] body) {
      String[] p = new String(body, StandardCharsets.UTF_8).split("\\|");
      return new Msg(p[0], p[1], p[2].equals("enrol"), Long.parseLong(p[3]));
    }
  }

  private final Settings settings;
  private final PrintStream out;

  public EnrolmentDemo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    Random random = new Random(3);
    List<Msg> history = new ArrayList<>();
    for (int i = 1; i <= settings.messages(); i++) {
      history.add(new Msg("student-" + random.nextInt(settings.students()), "CS " + (101 + random.nextInt(6)),
          random.nextInt(3) > 0, i));
    }
    List<Msg> published = new ArrayList<>(history);
    for (int i = 0; i < settings.messages() * settings.duplicatePercent() / 100; i++) {
      published.add(history.get(random.nextInt(history.size())));
    }
    Collections.shuffle(published, random);

    try (EmbeddedMongo mongo = EmbeddedMongo.start();
        MongoClient client = mongo.client();
        EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start();
        Connection connection = broker.connectionFactory().newConnection()) {
      MongoCollection<BsonDocument> students =
          client.getDatabase("school").getCollection("students", BsonDocument.class);
      SequencedSet classes = SequencedSet.of(students, "classes");
      broker.declareQueue("enrolments", "enrolments", "#");
      try (Channel publisher = connection.createChannel()) {
        publisher.confirmSelect();
        for (Msg m : published) {
          publisher.basicPublish("enrolments", m.student(), true, null, m.encode());
        }
        publisher.waitForConfirmsOrDie(30_000);
      }
      out.printf("Published %d enrol/unenrol messages (%d distinct, %d%% duplicates) in shuffled order%n",
          published.size(), history.size(), settings.duplicatePercent());

      CountDownLatch done = new CountDownLatch(published.size());
      Map<Outcome, AtomicInteger> outcomes = new ConcurrentHashMap<>();
      List<Channel> channels = new ArrayList<>();
      for (int i = 0; i < CONSUMERS; i++) {
        Channel ch = connection.createChannel();
        channels.add(ch);
        ch.basicQos(8);
        ch.basicConsume("enrolments", false, new DefaultConsumer(ch) {
          @Override
          public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties props, byte[] body)
              throws IOException {
            Msg m = Msg.decode(body);
            BsonString id = new BsonString(m.student());
            Outcome o = m.enrol() ? classes.add(id, m.course(), m.seq()) : classes.remove(id, m.course(), m.seq());
            outcomes.computeIfAbsent(o, k -> new AtomicInteger()).incrementAndGet();
            getChannel().basicAck(envelope.getDeliveryTag(), false);
            done.countDown();
          }
        });
      }
      out.printf("%d consumers applying them at once, no lock%n", CONSUMERS);
      if (!done.await(120, TimeUnit.SECONDS)) {
        throw new IllegalStateException("consumers did not finish: " + done.getCount() + " messages left");
      }
      for (Channel ch : channels) {
        ch.close();
      }

      Map<String, Set<String>> expected = new TreeMap<>();
      for (Msg m : history) {
        Set<String> s = expected.computeIfAbsent(m.student(), k -> new TreeSet<>());
        if (m.enrol()) {
          s.add(m.course());
        } else {
          s.remove(m.course());
        }
      }
      int differences = 0;
      for (var e : expected.entrySet()) {
        if (!classes.members(new BsonString(e.getKey())).equals(e.getValue())) {
          differences++;
        }
      }
      Result result = new Result(published.size(), count(outcomes, Outcome.APPLIED),
          count(outcomes, Outcome.SUPERSEDED), expected.size(), differences);
      printTable(result);
      return result;
    }
  }

  private static int count(Map<Outcome, AtomicInteger> outcomes, Outcome o) {
    AtomicInteger n = outcomes.get(o);
    return n == null ? 0 : n.get();
  }

  private void printTable(Result r) {
    out.println();
    out.println("+----------------------------------------+----------+");
    out.printf("| %-38s | %8s |%n", "verification", "value");
    out.println("+----------------------------------------+----------+");
    out.printf("| %-38s | %8d |%n", "messages consumed", r.published());
    out.printf("| %-38s | %8d |%n", "applied", r.applied());
    out.printf("| %-38s | %8d |%n", "superseded (late or duplicate)", r.superseded());
    out.printf("| %-38s | %8d |%n", "students", r.students());
    out.printf("| %-38s | %8d |%n", "differences from sequential order", r.differences());
    out.println("+----------------------------------------+----------+");
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }
}
