package dev.sluice.spring.boot;

import com.mongodb.client.MongoClient;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.env.Environment;

/**
 * The MongoDB lease store on the application's {@link MongoClient} (Spring Boot's, or one of its
 * own), in {@code sluice.store.mongodb.database} (default: the application's database), collection
 * {@code sluice.store.mongodb.lease-collection}. Built at start: building checks the server's
 * capabilities, so a MongoDB that cannot be reached fails the start after {@code
 * sluice.store.mongodb.operation-timeout}.
 */
@AutoConfiguration(afterName = "org.springframework.boot.autoconfigure.mongo.MongoAutoConfiguration")
@ConditionalOnClass({MongoClient.class, MongoLeaseStore.class})
@ConditionalOnBean(MongoClient.class)
@Conditional(OnStoreTypeCondition.Mongo.class)
@EnableConfigurationProperties(SluiceProperties.class)
public class SluiceMongoAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean(LeaseStore.class)
  public MongoLeaseStore sluiceLeaseStore(MongoClient client, SluiceProperties properties, Environment env) {
    SluiceProperties.Mongo m = properties.getStore().getMongodb();
    return Wrapped.configuration("sluice.store.mongodb", () -> MongoLeaseStore
        .builder(client.getDatabase(MongoDatabaseName.resolve(properties, env)))
        .collection(m.getLeaseCollection())
        .operationTimeout(m.getOperationTimeout())
        .build());
  }
}
