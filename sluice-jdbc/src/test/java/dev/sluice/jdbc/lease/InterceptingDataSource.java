package dev.sluice.jdbc.lease;

import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.logging.Logger;
import javax.sql.DataSource;

/**
 * A driver-level fake (named as such): a {@link DataSource} over a real one whose connections call
 * a hook before every method, so a test can pause a lease operation at an exact JDBC call (before
 * an UPDATE is prepared, inside {@code commit()}) against a real server.
 */
final class InterceptingDataSource implements DataSource {

  /** Runs before {@code method} is called on a connection, on the calling thread. */
  @FunctionalInterface
  interface Hook {
    void before(Method method, Object[] args) throws Exception;
  }

  private final DataSource real;
  private final Hook hook;

  InterceptingDataSource(DataSource real, Hook hook) {
    this.real = real;
    this.hook = hook;
  }

  @Override
  public Connection getConnection() throws SQLException {
    Connection connection = real.getConnection();
    return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(),
        new Class<?>[] {Connection.class}, (proxy, method, args) -> {
          hook.before(method, args);
          try {
            return method.invoke(connection, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
        });
  }

  @Override
  public Connection getConnection(String user, String password) {
    throw new UnsupportedOperationException();
  }

  @Override
  public PrintWriter getLogWriter() {
    return null;
  }

  @Override
  public void setLogWriter(PrintWriter out) {}

  @Override
  public void setLoginTimeout(int seconds) {}

  @Override
  public int getLoginTimeout() {
    return 0;
  }

  @Override
  public Logger getParentLogger() throws SQLFeatureNotSupportedException {
    throw new SQLFeatureNotSupportedException();
  }

  @Override
  public <T> T unwrap(Class<T> iface) {
    throw new UnsupportedOperationException();
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) {
    return false;
  }
}
