package dev.sluice.spring.boot;

import dev.sluice.spring.boot.SluiceProperties.StoreType;
import java.util.Locale;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.core.type.AnnotatedTypeMetadata;

/**
 * Matches when {@code sluice.store.type} is {@code auto} (or unset) or names the store of the
 * configuration class carrying the condition ({@link Mongo}, {@link Jdbc}).
 */
abstract class OnStoreTypeCondition extends SpringBootCondition {
  private final StoreType type;

  OnStoreTypeCondition(StoreType type) {
    this.type = type;
  }

  @Override
  public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
    String value = context.getEnvironment().getProperty("sluice.store.type", "auto");
    String wanted = value.trim().replace('-', '_').toUpperCase(Locale.ROOT);
    boolean match = wanted.equals(StoreType.AUTO.name()) || wanted.equals(type.name());
    return new ConditionOutcome(match, "sluice.store.type is " + value);
  }

  /** The MongoDB lease store. */
  static final class Mongo extends OnStoreTypeCondition {
    Mongo() {
      super(StoreType.MONGODB);
    }
  }

  /** The SQL lease store. */
  static final class Jdbc extends OnStoreTypeCondition {
    Jdbc() {
      super(StoreType.JDBC);
    }
  }
}
