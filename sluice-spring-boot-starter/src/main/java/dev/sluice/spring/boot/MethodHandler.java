package dev.sluice.spring.boot;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import org.bson.BsonDocument;
import org.springframework.util.ReflectionUtils;

/** A {@link SluiceListener} method as a {@link Handler}: called with the change, and the fence if it takes one. */
final class MethodHandler implements Handler<BsonDocument> {
  private final Object bean;
  private final Method method;
  private final boolean withFence;

  private MethodHandler(Object bean, Method method, boolean withFence) {
    this.bean = bean;
    this.method = method;
    this.withFence = withFence;
  }

  /**
   * The handler calling {@code method} on {@code bean}.
   *
   * @throws ConfigurationException naming the method if its parameters are not {@code (ChangeEvent)}
   *     or {@code (ChangeEvent, Fence)}
   */
  static MethodHandler of(Object bean, Method method) {
    Class<?>[] p = method.getParameterTypes();
    boolean ok = (p.length == 1 || p.length == 2) && p[0].isAssignableFrom(ChangeEvent.class)
        && (p.length == 1 || p[1].isAssignableFrom(Fence.class));
    if (!ok) {
      throw new ConfigurationException("@SluiceListener method " + method.getDeclaringClass().getName() + "."
          + method.getName() + " must take (ChangeEvent<BsonDocument>) or (ChangeEvent<BsonDocument>, Fence)");
    }
    ReflectionUtils.makeAccessible(method);
    return new MethodHandler(bean, method, p.length == 2);
  }

  @Override
  public void handle(ChangeEvent<BsonDocument> event, Fence fence) throws Exception {
    try {
      if (withFence) {
        method.invoke(bean, event, fence);
      } else {
        method.invoke(bean, event);
      }
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof Exception ex) {
        throw ex;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw e;
    }
  }

  @Override
  public String toString() {
    return method.getDeclaringClass().getSimpleName() + "." + method.getName();
  }
}
