package dev.sluice.spring.boot;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Declares a listener whose handler is the annotated method of a bean. The method takes the change
 * ({@code ChangeEvent<BsonDocument>}) and optionally its {@code Fence}, in that order, and may
 * throw: a failure goes through the listener's failure policy.
 *
 * <pre>{@code
 * @Component
 * class OrderTotals {
 *   @SluiceListener(value = "order-totals", collection = "orders", partitions = 4)
 *   void on(ChangeEvent<BsonDocument> change, Fence fence) { ... }
 * }
 * }</pre>
 *
 * <p>Every other setting comes from {@code sluice.listeners.<value>.*}; a property given there
 * overrides the attribute of the same name, so a deployment can change the collection or partition
 * count without a rebuild. The listener is a {@link SluiceListenerContainer} bean named {@code
 * sluiceListener.<value>}, started and stopped with the application context.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface SluiceListener {

  /** The listener's name: its key under {@code sluice.listeners}, and its default consumer group. */
  String value();

  /** The collection listened to, in {@code sluice.store.mongodb.database} unless the properties say otherwise. */
  String collection() default "";

  /** The consumer group; default: the listener's name. */
  String group() default "";

  /** Partitions; 0: the property, else 1. */
  int partitions() default 0;
}
