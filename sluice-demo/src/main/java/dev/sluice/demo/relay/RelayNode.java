package dev.sluice.demo.relay;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.demo.LeaseLines;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Position;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.bson.BsonDocument;

/**
 * One relay of the relay demo (MongoDB change stream to Kafka or to AMQP), in its own JVM so the
 * demo can kill it with SIGKILL mid-stream. Its standard output is the demo's view into it:
 * {@code READY}, {@code ACQUIRED epoch=<e>}, {@code DELIVERED <n>} after every change handed to
 * the sink, {@code COMMITTED <n>} (changes checkpointed by this JVM so far, which the broker
 * acknowledged), {@code LOST ...}.
 *
 * <p>Arguments: name, broker ({@code kafka} or {@code amqp}), MongoDB connection string, broker
 * address (Kafka bootstrap servers or AMQP URI), checkpoint every N changes, lease in ms, hold at
 * (0: never), standby ({@code true}: print {@code STANDBY} and start the listener only after the
 * line {@code start} arrives on standard input). With a hold point the relay prints {@code HOLDING <n>} after it handed its n-th
 * change to the sink and blocks there, inside the handler: it commits nothing more, while the
 * sink's own threads finish sending what it was handed. The demo kills it in that state.
 */
public final class RelayNode {
  private RelayNode() {}

  public static void main(String[] args) throws Exception {
    String name = args[0];
    String broker = args[1];
    String mongo = args[2];
    String address = args[3];
    int checkpointEvery = Integer.parseInt(args[4]);
    Duration lease = Duration.ofMillis(Long.parseLong(args[5]));
    int holdAt = Integer.parseInt(args[6]);
    boolean standby = Boolean.parseBoolean(args[7]);

    MongoClient client = MongoClients.create(mongo);
    MessageEncoder<BsonDocument> encoder = MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build();
    Handler<BsonDocument> sink;
    AutoCloseable closeSink;
    switch (broker) {
      case RelayDemo.KAFKA -> {
        KafkaSink<BsonDocument> k = KafkaSink.builder(address, RelayDemo.TOPIC, encoder)
            .flushTimeout(Duration.ofSeconds(5))
            .build();
        sink = k;
        closeSink = k;
      }
      case RelayDemo.AMQP -> {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUri(address);
        AmqpSink<BsonDocument> a = AmqpSink.builder(factory, RelayDemo.EXCHANGE, encoder)
            .flushTimeout(Duration.ofSeconds(5))
            .build();
        sink = a;
        closeSink = a;
      }
      default -> throw new IllegalArgumentException("unknown broker '" + broker + "'; known: kafka, amqp");
    }

    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client, RelayDemo.DATABASE, RelayDemo.COLLECTION)
                .streamName(RelayDemo.streamName(broker))
                .batchSize(200)
                .build(),
            MongoLeaseStore.builder(client.getDatabase(RelayDemo.DATABASE)).build()).group("relay")
        .owner(name)
        .handler(holdingAt(holdAt, sink))
        .leaseDuration(lease)
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        // A relay that will be killed checkpoints on count only, so the kill lands exactly half a
        // batch past its checkpoint; the replacement also commits after a second without one.
        .checkpoint(CheckpointPolicy.every(checkpointEvery, holdAt > 0 ? Duration.ofHours(1) : Duration.ofSeconds(1)))
        .observer(new Progress(name))
        .build();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      listener.close();
      try {
        closeSink.close();
      } catch (Exception e) {
        System.out.println("SINK-CLOSE-FAILED " + e);
      }
    }));
    if (standby) {
      // Started ahead of time because JVM start-up takes seconds on a loaded machine; the
      // listener itself (and so the lease contention) starts only when the demo says so.
      System.out.println("STANDBY " + name);
      BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line = commands.readLine(); !"start".equals(line); line = commands.readLine()) {
        if (line == null) {
          System.exit(0); // the demo went away
        }
      }
    }
    listener.start();
    System.out.println("READY " + name);
    Thread.currentThread().join(); // runs until the demo kills it
  }

  private static Handler<BsonDocument> holdingAt(int holdAt, Handler<BsonDocument> sink) {
    CountDownLatch never = new CountDownLatch(1);
    int[] handed = {0};
    return new Handler<>() {
      @Override
      public void handle(ChangeEvent<BsonDocument> event, Fence fence) throws Exception {
        sink.handle(event, fence);
        if (++handed[0] == holdAt) {
          System.out.println("HOLDING " + handed[0]);
          never.await(); // until the demo kills this process
        }
      }

      @Override
      public void flush(Fence fence) throws Exception {
        sink.flush(fence);
      }
    };
  }

  /** Prints the engine's progress; the engine calls it from one partition thread. */
  private static final class Progress extends LeaseLines {
    private int delivered;
    private int committed;

    Progress(String name) {
      super(name);
    }

    @Override
    public void delivered(ChangeEvent<?> event, long handlerNanos) {
      System.out.println("DELIVERED " + ++delivered);
    }

    @Override
    public void committed(String lease, long epoch, Position position, int changes) {
      committed += changes;
      System.out.println("COMMITTED " + committed);
    }

    @Override
    public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
      System.out.println("HANDLER-FAILED " + name + " " + event + " attempt=" + attempt + ": " + error);
    }

    @Override
    public void feedFailed(String lease, Throwable error) {
      System.out.println("FEED-FAILED " + name + ": " + error);
    }
  }
}
