package dev.sluice.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.spring.boot.SluiceListenerContainer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.StandardEnvironment;

/** The sample as its command starts it, on the embedded MongoDB: the orders it writes are handled. */
class SampleApplicationTest {

  @Test
  void theSampleStartsOnTheEmbeddedMongoDbAndHandlesItsOrders() {
    SpringApplication app = SampleApplication.application();
    // Without the JVM's system properties: the test kit's -Dsluice.mongodb.uri is no starter
    // property and would fail the start (ADR 0077); the sample runs on its embedded MongoDB.
    app.addInitializers(c -> c.getEnvironment().getPropertySources()
        .remove(StandardEnvironment.SYSTEM_PROPERTIES_PROPERTY_SOURCE_NAME));
    ConfigurableApplicationContext context = app.run("--sample.orders=3");
    try {
      // run() returns after the writer saw both listeners handle every order.
      assertThat(context.getBean(OrderTotals.class).handled()).isEqualTo(3);
      assertThat(context.getBean(OrderTotals.class).total()).isEqualTo(10 + 20 + 30);
      assertThat(context.getBean(OrderAudit.class).seen()).isEqualTo(3);
      assertThat(context.getBeansOfType(SluiceListenerContainer.class)).containsOnlyKeys(
          "sluiceListener.order-totals", "sluiceListener.order-audit");
    } finally {
      context.close();
    }
    assertThat(context.isActive()).isFalse();
  }
}
