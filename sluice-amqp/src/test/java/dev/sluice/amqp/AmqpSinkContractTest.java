package dev.sluice.amqp;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.sluice.listener.Handler;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.sink.SinkContract;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionTimeoutException;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

class AmqpSinkContractTest extends SinkContract {
  private static final int LIMIT = 1_048_576;
  private static EmbeddedAmqpBroker broker;
  /** What the test's consumer took off each queue so far (the broker forgets it after a restart). */
  private final Map<String, List<Received>> drained = new ConcurrentHashMap<>();

  @BeforeAll
  static void startBroker0() {
    broker = EmbeddedAmqpBroker.start();
  }

  @AfterAll
  static void stopBroker0() {
    if (broker != null) {
      broker.close();
    }
  }

  @Override
  protected void prepare(String destination) {
    broker.declareQueue(destination, destination, "#");
  }

  @Override
  protected Handler<BsonDocument> newSink(
      String destination, MessageEncoder<BsonDocument> encoder, Duration flushTimeout) {
    return AmqpSink.builder(broker.connectionFactory(), destination, encoder)
        .flushTimeout(flushTimeout)
        .maxMessageBytes(LIMIT)
        .build();
  }

  @Override
  protected List<Received> received(String destination, int atLeast, Duration timeout) {
    List<Received> got = drained.computeIfAbsent(destination, d -> new ArrayList<>());
    try (Connection c = broker.connectionFactory().newConnection();
        Channel ch = c.createChannel()) {
      Awaitility.await()
          .atMost(timeout)
          .pollInterval(Duration.ofMillis(20))
          .until(() -> drain(ch, destination, got) >= atLeast);
    } catch (ConditionTimeoutException e) {
      // return what arrived; the caller's assertion names the shortfall
    } catch (Exception e) {
      throw new IllegalStateException("Cannot consume from " + destination, e);
    }
    return List.copyOf(got);
  }

  private static int drain(Channel ch, String queue, List<Received> into) throws Exception {
    for (GetResponse r = ch.basicGet(queue, true); r != null; r = ch.basicGet(queue, true)) {
      Map<String, String> headers = new HashMap<>();
      if (r.getProps().getHeaders() != null) {
        r.getProps().getHeaders().forEach((k, v) -> headers.put(k, String.valueOf(v)));
      }
      into.add(new Received(Envelope.parse(r.getBody()).key(), headers, r.getBody()));
    }
    return into.size();
  }

  @Override
  protected long storedAtBroker(String destination) {
    try (Connection c = broker.connectionFactory().newConnection();
        Channel ch = c.createChannel()) {
      return ch.queueDeclarePassive(destination).getMessageCount()
          + drained.getOrDefault(destination, List.of()).size();
    } catch (Exception e) {
      throw new IllegalStateException("Cannot count messages of " + destination, e);
    }
  }

  @Override
  protected int messageSizeLimit() {
    return LIMIT;
  }

  @Override
  protected void stopBroker() {
    broker.stop();
  }

  @Override
  protected void startBroker() {
    broker.startBroker();
  }
}
