package io.queen.embedded.internal.tx;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.Set;

/**
 * The view of a transactional handler's connection that the handler gets: everything a connection does, but the
 * transaction's end stays with the consume loop. Committing, rolling back the whole transaction or turning
 * auto-commit on would split the handler's statements from the bundle and the acknowledgement, so those throw;
 * {@code close()} does nothing (a handler's try-with-resources is harmless), and the loop gives the connection back.
 */
final class HandlerConnection implements InvocationHandler {

  private static final Set<String> REFUSED = Set.of("commit", "setAutoCommit", "setTransactionIsolation", "abort");

  private final Connection target;

  private HandlerConnection(Connection target) {
    this.target = target;
  }

  /** The guarded view of {@code c}. */
  static Connection guard(Connection c) {
    return (Connection) Proxy.newProxyInstance(HandlerConnection.class.getClassLoader(), new Class<?>[] {Connection.class},
        new HandlerConnection(c));
  }

  /** The connection behind a view made by {@link #guard}. */
  static Connection unwrap(Connection view) {
    return ((HandlerConnection) Proxy.getInvocationHandler(view)).target;
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    String name = method.getName();
    int arity = args == null ? 0 : args.length;
    if (REFUSED.contains(name) || name.equals("rollback") && arity == 0) {
      throw new IllegalStateException("a transactional handler must not call " + name + "() on tx.connection(): the"
          + " consume loop commits the handler's statements together with the bundle and the acknowledgement, or rolls"
          + " all of them back; throw an exception to roll back (the message then fails and is retried), or use a"
          + " savepoint for part of the work");
    }
    switch (name) {
      case "close":
        return null;
      case "isClosed":
        return false;
      case "unwrap":
        if (arity == 1 && ((Class<?>) args[0]).isInstance(proxy)) {
          return proxy;
        }
        break;
      case "equals":
        return proxy == args[0];
      case "hashCode":
        return System.identityHashCode(proxy);
      case "toString":
        return "transactional handler's connection (" + target + ")";
      default:
        break;
    }
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
