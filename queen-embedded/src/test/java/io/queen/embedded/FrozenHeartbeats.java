package io.queen.embedded;

import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;
import java.io.PrintWriter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.sql.DataSource;

/**
 * A node's {@link DataSource} on which a test freezes the node's heartbeat, as a stalled process or a long pause
 * would: after {@link #freeze(Queen)} the heartbeat thread ({@code queen-<node>-heartbeat-<n>}) blocks at its next
 * call on a connection it took from here, and every other thread of the node goes on. The node is handed this
 * DataSource through the builder's {@code dataSource(...)}, as an application's pool; connections of other threads
 * are the pool's own, untouched. The database is the real one: only the heartbeat's JDBC calls wait.
 *
 * <p>A freeze lasts until the node closes: the close interrupts the waiting heartbeat, which then sees its call fail
 * and gives its connection back as after any failed beat (or, interrupted while it slept between beats, gives it back
 * once the node is closing).
 */
public final class FrozenHeartbeats implements DataSource {
  private static final Pattern HEARTBEAT = Pattern.compile("queen-.+-heartbeat-\\d+");

  private final DataSource pool;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  /** Heartbeat threads that asked this DataSource for a connection (guarded by lock). */
  private final Set<Thread> seen = new HashSet<>();
  /** Heartbeat threads frozen, and their nodes (guarded by lock). */
  private final Map<Thread, QueenImpl> frozen = new HashMap<>();
  /** Heartbeat threads inside a call on the pool or on one of its connections or statements (guarded by lock). */
  private final Set<Thread> inCall = new HashSet<>();

  public FrozenHeartbeats(DataSource pool) {
    this.pool = pool;
  }

  /**
   * Freezes the heartbeat of {@code node}, which was started on this DataSource. Returns once no call of the heartbeat
   * is running: no beat lands after this returns.
   */
  public void freeze(Queen node) throws InterruptedException {
    String prefix = "queen-" + node.nodeId() + "-heartbeat-";
    List<Thread> threads = Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith(prefix)).collect(Collectors.toList());
    if (threads.size() != 1) {
      throw new AssertionError("expected one heartbeat thread of node " + node.nodeId() + ", found " + threads);
    }
    Thread heartbeat = threads.get(0);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    lock.lock();
    try {
      while (!seen.contains(heartbeat)) { // (right after the node's start its heartbeat may not have asked yet)
        if (!changed.await(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
          throw new AssertionError(heartbeat.getName() + " took no connection from this DataSource: was node "
              + node.nodeId() + " started on it?");
        }
      }
      frozen.put(heartbeat, (QueenImpl) node);
      while (inCall.contains(heartbeat)) { // a beat under way: it lands before the freeze counts
        if (!changed.await(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
          throw new AssertionError(heartbeat.getName() + " is still inside a call after 10 s");
        }
      }
    } finally {
      lock.unlock();
    }
  }

  /** Waits while the calling thread is frozen, then counts it inside a call. */
  private void enter() throws SQLException {
    Thread me = Thread.currentThread();
    lock.lock();
    try {
      while (frozen.containsKey(me)) {
        if (frozen.get(me).isClosing()) { // (its close may have interrupted it while it slept between beats)
          frozen.remove(me);
          break;
        }
        try {
          changed.await(50, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
          frozen.remove(me); // the node closes: the freeze ends with it
          throw new SQLException("the heartbeat was interrupted while frozen", "57P01", e);
        }
      }
      inCall.add(me);
    } finally {
      lock.unlock();
    }
  }

  private void exit() {
    lock.lock();
    try {
      inCall.remove(Thread.currentThread());
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  @Override
  public Connection getConnection() throws SQLException {
    Thread me = Thread.currentThread();
    if (!HEARTBEAT.matcher(me.getName()).matches()) {
      return pool.getConnection();
    }
    lock.lock();
    try {
      seen.add(me);
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    enter();
    try {
      return gated(Connection.class, pool.getConnection());
    } finally {
      exit();
    }
  }

  @Override
  public Connection getConnection(String username, String password) throws SQLException {
    throw new SQLFeatureNotSupportedException("a node takes its connections with getConnection()");
  }

  /** {@code target} as {@code type}, every call of it passing through the freeze; statements it returns too. */
  private <T> T gated(Class<T> type, T target) {
    InvocationHandler handler = (proxy, method, args) -> {
      if (method.getDeclaringClass() == Object.class) {
        return invoke(method, target, args);
      }
      enter();
      try {
        Object result = invoke(method, target, args);
        Class<?> returns = method.getReturnType();
        if (result != null && returns.isInterface() && Statement.class.isAssignableFrom(returns)) {
          return gated(cast(returns), result);
        }
        return result;
      } finally {
        exit();
      }
    };
    return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler));
  }

  @SuppressWarnings("unchecked")
  private static Class<Object> cast(Class<?> type) {
    return (Class<Object>) type;
  }

  private static Object invoke(Method method, Object target, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @Override
  public PrintWriter getLogWriter() throws SQLException {
    return pool.getLogWriter();
  }

  @Override
  public void setLogWriter(PrintWriter out) throws SQLException {
    pool.setLogWriter(out);
  }

  @Override
  public void setLoginTimeout(int seconds) throws SQLException {
    pool.setLoginTimeout(seconds);
  }

  @Override
  public int getLoginTimeout() throws SQLException {
    return pool.getLoginTimeout();
  }

  @Override
  public Logger getParentLogger() throws SQLFeatureNotSupportedException {
    return pool.getParentLogger();
  }

  @Override
  public <T> T unwrap(Class<T> iface) throws SQLException {
    return pool.unwrap(iface);
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) throws SQLException {
    return pool.isWrapperFor(iface);
  }
}
