package io.queen.pgconn.internal.source;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * A {@link ChunkedSnapshot.Connector} for the tests that need to act at the start of a chunk: its connections are
 * the database's own, passed through, except that each time a REPEATABLE READ transaction is about to begin on them
 * (a chunk's read: {@code setTransactionIsolation(REPEATABLE_READ)}, then {@code setAutoCommit(false)}; the low
 * watermark is written by then and no statement of the chunk has run) {@code atStart} runs first with the real
 * connection. It can commit a change of another connection (which then falls inside the window, before the chunk's
 * snapshot), or begin the chunk's transaction itself, as {@code SET TRANSACTION SNAPSHOT} does.
 */
final class ChunkStart {
  /** What to do where a chunk's transaction begins. */
  @FunctionalInterface
  interface Action {
    void run(Connection chunkConnection) throws SQLException;
  }

  private ChunkStart() {}

  static ChunkedSnapshot.Connector connector(ChunkedSnapshot.Connector real, Action atStart) {
    return () -> watched(real.open(), atStart);
  }

  private static Connection watched(Connection real, Action atStart) {
    int[] isolation = {Connection.TRANSACTION_READ_COMMITTED};
    return (Connection) Proxy.newProxyInstance(ChunkStart.class.getClassLoader(), new Class<?>[] {Connection.class},
        (proxy, method, args) -> {
          Object out;
          try {
            out = method.invoke(real, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
          if (method.getName().equals("setTransactionIsolation")) {
            isolation[0] = (Integer) args[0];
          } else if (method.getName().equals("setAutoCommit") && !((Boolean) args[0])
              && isolation[0] == Connection.TRANSACTION_REPEATABLE_READ) {
            atStart.run(real);
          }
          return out;
        });
  }
}
