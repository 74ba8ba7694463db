package dev.sluice.mongodb.sequenced;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoCollection;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
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
import org.junit.jupiter.api.Test;

/**
 * Seed 003 end to end: enrol/unenrol messages stamped with sequence numbers go through a real AMQP
 * broker shuffled and partly duplicated; five consumers apply them at once with no lock. The
 * stored enrolments equal applying the messages in sequence order: 0 differences.
 */
class EnrolmentOverAmqpTest {
  private static final int CONSUMERS = 5;

  record Msg(String student, String course, boolean enrol, long seq) {
    String encode() {
      return student + "|" + course + "|" + (enrol ? "enrol" : "unenrol") + "|" + seq;
    }

    static Msg decode(byte[] body) {
      String[] p = new String(body, StandardCharsets.UTF_8).split("\\|");
      return new Msg(p[0], p[1], p[2].equals("enrol"), Long.parseLong(p[3]));
    }
  }

  @Test
  void fiveConsumersOfShuffledDuplicatedMessagesEndAsSequentialApplication() throws Exception {
    Random random = new Random(3);
    List<Msg> history = new ArrayList<>();
    for (int i = 1; i <= 600; i++) {
      history.add(
          new Msg("s" + random.nextInt(30), "CS " + (100 + random.nextInt(6)), random.nextInt(3) > 0, i));
    }
    List<Msg> published = new ArrayList<>(history);
    for (int i = 0; i < 120; i++) {
      published.add(history.get(random.nextInt(history.size())));
    }
    Collections.shuffle(published, random);

    try (InMemoryMongo mongo = new InMemoryMongo();
        EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start();
        Connection connection = broker.connectionFactory().newConnection()) {
      MongoCollection<BsonDocument> students =
          mongo.freshDatabase().getCollection("students", BsonDocument.class);
      SequencedSet classes = SequencedSet.of(students, "classes");
      broker.declareQueue("enrolments", "enrolment-consumers", "#");

      try (Channel publisher = connection.createChannel()) {
        publisher.confirmSelect();
        for (Msg m : published) {
          publisher.basicPublish(
              "enrolments", m.student(), true, null, m.encode().getBytes(StandardCharsets.UTF_8));
        }
        assertThat(publisher.waitForConfirms(30_000)).isTrue();
      }

      CountDownLatch done = new CountDownLatch(published.size());
      Map<Outcome, AtomicInteger> outcomes = new ConcurrentHashMap<>();
      Set<Long> appliedTwice = ConcurrentHashMap.newKeySet();
      Set<Long> applied = ConcurrentHashMap.newKeySet();
      List<Channel> channels = new ArrayList<>();
      for (int i = 0; i < CONSUMERS; i++) {
        Channel ch = connection.createChannel();
        channels.add(ch);
        ch.basicQos(8);
        ch.basicConsume(
            "enrolment-consumers",
            false,
            new DefaultConsumer(ch) {
              @Override
              public void handleDelivery(
                  String tag, Envelope envelope, AMQP.BasicProperties props, byte[] body)
                  throws java.io.IOException {
                Msg m = Msg.decode(body);
                BsonString id = new BsonString(m.student());
                Outcome o =
                    m.enrol()
                        ? classes.add(id, m.course(), m.seq())
                        : classes.remove(id, m.course(), m.seq());
                outcomes.computeIfAbsent(o, k -> new AtomicInteger()).incrementAndGet();
                if (o == Outcome.APPLIED && !applied.add(m.seq())) {
                  appliedTwice.add(m.seq());
                }
                getChannel().basicAck(envelope.getDeliveryTag(), false);
                done.countDown();
              }
            });
      }
      assertThat(done.await(60, TimeUnit.SECONDS)).as("all messages consumed").isTrue();
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
      assertThat(differences).as("students differing from sequential application").isZero();
      assertThat(appliedTwice).as("a duplicate applied twice").isEmpty();
      assertThat(outcomes.get(Outcome.SUPERSEDED).get())
          .as("late and duplicate messages were recognised")
          .isGreaterThanOrEqualTo(120);
    }
  }
}
