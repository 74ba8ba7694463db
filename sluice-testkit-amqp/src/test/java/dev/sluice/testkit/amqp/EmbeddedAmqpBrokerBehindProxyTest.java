package dev.sluice.testkit.amqp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.FaultProxy.Direction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The AMQP broker advertises nothing: a connection factory pointed at a plain fault proxy in front
 * of it ({@link EmbeddedAmqpBroker#connectionFactory(FaultProxy)}) sends everything through it.
 */
class EmbeddedAmqpBrokerBehindProxyTest {
  @RegisterExtension final FaultProxies proxies = new FaultProxies();

  @Test
  void confirmsGoThroughTheProxyAndABlackholeHoldsThem() throws Exception {
    try (EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start()) {
      broker.declareQueue("x", "q", "#");
      FaultProxy proxy = proxies.to("amqp", "127.0.0.1", broker.port());
      try (Connection c = broker.connectionFactory(proxy).newConnection();
          Channel ch = c.createChannel()) {
        ch.confirmSelect();
        ch.basicPublish("x", "a.b", true, null, "one".getBytes(StandardCharsets.UTF_8));
        assertThat(ch.waitForConfirms(10_000)).isTrue();
        long up = proxy.bytesForwarded(Direction.UPSTREAM);
        assertThat(up).isPositive();
        assertThat(proxy.connectionsAccepted()).isEqualTo(1);

        proxy.blackhole(Duration.ofSeconds(20));
        ch.basicPublish("x", "a.b", true, null, "two".getBytes(StandardCharsets.UTF_8));
        assertThatThrownBy(() -> ch.waitForConfirms(1_000)).isInstanceOf(TimeoutException.class);
        assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isEqualTo(up);

        proxy.pass();
        assertThat(ch.waitForConfirms(10_000)).isTrue();
        GetResponse r = ch.basicGet("q", true);
        assertThat(new String(r.getBody(), StandardCharsets.UTF_8)).isEqualTo("one");
        r = ch.basicGet("q", true);
        assertThat(new String(r.getBody(), StandardCharsets.UTF_8)).isEqualTo("two");
      }
    }
  }
}
