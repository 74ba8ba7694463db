package dev.sluice.spring.boot;

import com.mongodb.client.MongoClient;
import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Handler;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.spring.boot.SluiceProperties.ListenerProperties;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.bson.BsonDocument;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/**
 * Finds the declared listeners, {@code sluice.listeners.<name>} entries naming a {@link Handler}
 * bean and methods annotated with {@link SluiceListener}, and registers one {@link
 * SluiceListenerContainer} bean per listener ({@code sluiceListener.<name>}) once every singleton
 * exists; the context starts them after its refresh and stops them when it closes.
 */
final class SluiceListenerRegistrar implements BeanPostProcessor, SmartInitializingSingleton, BeanFactoryAware {
  /** Bean names of the containers: this prefix and the listener's name. */
  static final String BEAN_PREFIX = "sluiceListener.";
  private static final boolean MICROMETER = ClassUtils.isPresent("io.micrometer.core.instrument.MeterRegistry",
      SluiceListenerRegistrar.class.getClassLoader());

  private record Annotated(Object bean, Method method, SluiceListener annotation) {}

  private final Map<String, Annotated> annotated = new LinkedHashMap<>();
  private final Set<Class<?>> without = ConcurrentHashMap.newKeySet();
  private DefaultListableBeanFactory beanFactory;

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = (DefaultListableBeanFactory) beanFactory;
  }

  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
    Class<?> type = AopUtils.getTargetClass(bean);
    if (without.contains(type) || type.getName().startsWith("org.springframework.")) {
      return bean;
    }
    Map<Method, SluiceListener> found = MethodIntrospector.selectMethods(type,
        (MethodIntrospector.MetadataLookup<SluiceListener>) m -> AnnotatedElementUtils.findMergedAnnotation(m,
            SluiceListener.class));
    if (found.isEmpty()) {
      without.add(type);
      return bean;
    }
    found.forEach((method, a) -> {
      Annotated previous = annotated.put(a.value(), new Annotated(bean, method, a));
      if (previous != null) {
        throw new ConfigurationException("@SluiceListener(\"" + a.value() + "\") is declared twice: on "
            + previous.method() + " and on " + method + "; listener names must be unique");
      }
    });
    return bean;
  }

  @Override
  public void afterSingletonsInstantiated() {
    SluiceProperties properties = beanFactory.getBean(SluiceProperties.class);
    Set<String> names = new LinkedHashSet<>(properties.getListeners().keySet());
    names.addAll(annotated.keySet());
    if (names.isEmpty()) {
      return;
    }
    ListenerFactory factory = new ListenerFactory(beans(properties, names));
    SluiceListeners registry = beanFactory.getBean(SluiceListeners.class);
    for (String name : names) {
      ListenerProperties p = properties.getListeners().getOrDefault(name, new ListenerProperties());
      Annotated a = annotated.get(name);
      SluiceListenerContainer container = factory.container(name, p, a == null ? null : a.annotation(),
          handler(name, p, a));
      String beanName = BEAN_PREFIX + name;
      beanFactory.registerSingleton(beanName, container);
      // Also stopped if the refresh fails after it started.
      beanFactory.registerDisposableBean(beanName, container::stop);
      registry.add(container);
    }
  }

  private ListenerFactory.Beans beans(SluiceProperties properties, Set<String> names) {
    LeaseStore store = beanFactory.getBeanProvider(LeaseStore.class).getIfAvailable();
    if (store == null) {
      throw new ConfigurationException("Sluice listeners " + names + " need a lease store: define a MongoClient"
          + " (spring.data.mongodb.uri) or a DataSource with sluice-jdbc on the class path, or a LeaseStore bean"
          + " (sluice.store.type is " + properties.getStore().getType().name().toLowerCase() + ")");
    }
    MongoClient client = beanFactory.getBeanProvider(MongoClient.class).getIfAvailable();
    Environment env = beanFactory.getBean(Environment.class);
    String database = client == null ? null : defaultDatabase(properties, env);
    @SuppressWarnings("unchecked")
    ObjectProvider<DeadLetterStore<BsonDocument>> deadLetters =
        (ObjectProvider<DeadLetterStore<BsonDocument>>) (ObjectProvider<?>) beanFactory.getBeanProvider(DeadLetterStore.class);
    Object registry = MICROMETER ? beanFactory.getBeanProvider(io.micrometer.core.instrument.MeterRegistry.class)
        .getIfUnique() : null;
    return new ListenerFactory.Beans(properties, store, client, database, deadLetters.getIfUnique(), registry,
        beanFactory.getBeanProvider(ListenerObserver.class).orderedStream().toList(), ownerLabel(properties, env));
  }

  private static String defaultDatabase(SluiceProperties properties, Environment env) {
    try {
      return MongoDatabaseName.resolve(properties, env);
    } catch (ConfigurationException e) {
      return null; // a listener without its own database property names the missing one
    }
  }

  /** {@code sluice.owner}, else {@code spring.application.name} if it is a valid label, else none. */
  static String ownerLabel(SluiceProperties properties, Environment env) {
    if (properties.getOwner() != null) {
      return properties.getOwner();
    }
    String app = env.getProperty("spring.application.name");
    return app != null && !app.isBlank() && !app.contains("/") && app.length() <= 100 ? app : null;
  }

  @SuppressWarnings("unchecked")
  private Handler<BsonDocument> handler(String name, ListenerProperties p, Annotated a) {
    String at = "sluice.listeners." + name + ".handler";
    if (p.getHandler() != null && a != null) {
      throw new ConfigurationException(at + " names bean '" + p.getHandler() + "', but method " + a.method()
          + " is annotated @SluiceListener(\"" + name + "\") too: a listener has one handler");
    }
    if (a != null) {
      return MethodHandler.of(a.bean(), a.method());
    }
    if (p.getHandler() == null) {
      throw new ConfigurationException(at + " must name a bean of type " + Handler.class.getName()
          + ", or a method must be annotated @SluiceListener(\"" + name + "\")");
    }
    if (!beanFactory.containsBean(p.getHandler())) {
      throw new ConfigurationException(at + " names bean '" + p.getHandler() + "', which does not exist; beans of"
          + " type Handler: " + java.util.List.of(beanFactory.getBeanNamesForType(Handler.class)));
    }
    Object bean = beanFactory.getBean(p.getHandler());
    if (!(bean instanceof Handler<?> h)) {
      throw new ConfigurationException(at + " names bean '" + p.getHandler() + "' of type "
          + bean.getClass().getName() + ", which is not a " + Handler.class.getName());
    }
    return (Handler<BsonDocument>) h;
  }
}
