package io.queen.embedded.internal;

import io.queen.DatabaseLoginException;
import io.queen.QueenDatabaseException;
import io.queen.QueenException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.ThreadLocalRandom;
import javax.sql.DataSource;

/**
 * The one boundary where {@link SQLException} becomes a {@link QueenDatabaseException} (or a
 * {@link DatabaseLoginException}), and the bounded retry of transactions Queen owns.
 */
public final class Sql {
  /** How many times a transaction Queen owns is retried after a serialization failure or deadlock. */
  public static final int MAX_RETRIES = 5;

  private Sql() {}

  /** SQLStates that Queen reacts to. */
  public enum State {
    SERIALIZATION_FAILURE("40001", true),
    DEADLOCK_DETECTED("40P01", true),
    LOCK_NOT_AVAILABLE("55P03", true),
    QUERY_CANCELED("57014", false),
    ADMIN_SHUTDOWN("57P01", true),
    UNIQUE_VIOLATION("23505", false),
    RAISE_EXCEPTION("P0001", false);

    final String code;
    final boolean retriable;

    State(String code, boolean retriable) {
      this.code = code;
      this.retriable = retriable;
    }

    public String code() {
      return code;
    }
  }

  /** Whether retrying the whole transaction may succeed: serialization, deadlock, lock timeout, class 08. */
  public static boolean isTransient(SQLException e) {
    String s = e.getSQLState();
    if (s == null) {
      return false;
    }
    if (s.startsWith("08")) {
      return true; // connection exception
    }
    if (s.startsWith("28")) {
      return false; // authorisation: never retried
    }
    for (State st : State.values()) {
      if (st.code.equals(s)) {
        return st.retriable;
      }
    }
    return false;
  }

  /**
   * Whether the connection died under the statement: class 08 (connection exception) or the server
   * ending the session (57P01 admin shutdown / {@code pg_terminate_backend}, 57P02 crash shutdown,
   * 57P03 cannot connect now). The outcome of a statement that was running is then unknown.
   */
  public static boolean isConnectionLoss(SQLException e) {
    String s = e.getSQLState();
    return s != null && (s.startsWith("08") || s.equals("57P01") || s.equals("57P02") || s.equals("57P03"));
  }

  /** Whether the same statement may simply be run again in a new transaction (no connection loss). */
  public static boolean isRetriableInTransaction(SQLException e) {
    String s = e.getSQLState();
    return State.SERIALIZATION_FAILURE.code.equals(s) || State.DEADLOCK_DETECTED.code.equals(s)
        || State.LOCK_NOT_AVAILABLE.code.equals(s);
  }

  /**
   * The one conversion: a refused login (SQLState class 28) becomes a {@link DatabaseLoginException},
   * anything else a {@link QueenDatabaseException} naming the operation. A pool that timed out waiting for
   * a connection ({@link java.sql.SQLTransientException}, e.g. HikariCP's after {@code connectTimeout})
   * is transient whatever its SQLState.
   */
  public static QueenException translate(String operation, SQLException e) {
    SQLException login = loginFailure(e);
    if (login != null) {
      return new DatabaseLoginException(null, login.getSQLState(), login);
    }
    return new QueenDatabaseException(operation, e.getSQLState(),
        isTransient(e) || e instanceof java.sql.SQLTransientException, e);
  }

  /** The refused login (SQLState class 28) in {@code t} or its causes, or {@code null}. */
  public static SQLException loginFailure(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException se && se.getSQLState() != null && se.getSQLState().startsWith("28")) {
        return se;
      }
    }
    return null;
  }

  /** Double-quotes an identifier that was validated against an allow-list. */
  public static String quoteIdent(String ident) {
    return "\"" + ident.replace("\"", "\"\"") + "\"";
  }

  /** Work on a connection inside a transaction. */
  @FunctionalInterface
  public interface TxWork<T> {
    T run(Connection c) throws SQLException;
  }

  /**
   * Runs {@code work} in a transaction Queen owns: commit on return, rollback on exception; a
   * serialization failure, deadlock or lock timeout is retried with jittered backoff up to
   * {@link #MAX_RETRIES} times.
   */
  public static <T> T inTransaction(DataSource ds, String operation, TxWork<T> work) {
    for (int attempt = 0; ; attempt++) {
      try (Connection c = ds.getConnection()) {
        boolean auto = c.getAutoCommit();
        if (auto) {
          c.setAutoCommit(false);
        }
        try {
          T result = work.run(c);
          c.commit();
          return result;
        } catch (SQLException | RuntimeException | Error e) {
          try {
            c.rollback();
          } catch (SQLException suppressed) {
            e.addSuppressed(suppressed);
          }
          throw e;
        } finally {
          if (auto) {
            try {
              c.setAutoCommit(true);
            } catch (SQLException ignored) {
              // the connection is broken; the pool will discard it
            }
          }
        }
      } catch (SQLException e) {
        if (attempt < MAX_RETRIES && isRetriableInTransaction(e)) {
          backoff(attempt);
          continue;
        }
        throw translate(operation, e);
      }
    }
  }

  /** How many times idempotent work is retried on a fresh connection after the connection was lost. */
  public static final int MAX_CONNECTION_RETRIES = 10;
  /** Connection-loss retries of idempotent work stop once this long has passed since the first try. */
  private static final long CONNECTION_RETRY_WINDOW_NANOS = 5_000_000_000L;

  /**
   * Like {@link #inTransaction} (or {@link #autoCommit} when {@code autoCommit}), for work that may
   * safely run again when its outcome is unknown (acks, renewals and releases are idempotent under
   * their lease): a lost connection is also retried, on another connection from the pool, up to
   * {@link #MAX_CONNECTION_RETRIES} times within 5 s. Without this a consumer whose handlers succeeded
   * loses their acknowledgements to one terminated backend, and the batch is handled again after the
   * lease expires.
   */
  public static <T> T idempotent(DataSource ds, String operation, boolean autoCommit, TxWork<T> work) {
    long started = System.nanoTime();
    for (int attempt = 0; ; attempt++) {
      try {
        return autoCommit ? autoCommit(ds, operation, work) : inTransaction(ds, operation, work);
      } catch (QueenDatabaseException e) {
        if (attempt < MAX_CONNECTION_RETRIES && System.nanoTime() - started < CONNECTION_RETRY_WINDOW_NANOS
            && e.getCause() instanceof SQLException se && isConnectionLoss(se)) {
          backoff(Math.min(attempt, 3));
          continue;
        }
        throw e;
      }
    }
  }

  /** Runs {@code work} on an auto-commit connection (one statement = one transaction). */
  public static <T> T autoCommit(DataSource ds, String operation, TxWork<T> work) {
    for (int attempt = 0; ; attempt++) {
      try (Connection c = ds.getConnection()) {
        if (!c.getAutoCommit()) {
          c.setAutoCommit(true);
        }
        return work.run(c);
      } catch (SQLException e) {
        if (attempt < MAX_RETRIES && isRetriableInTransaction(e)) {
          backoff(attempt);
          continue;
        }
        throw translate(operation, e);
      }
    }
  }

  static void backoff(int attempt) {
    long max = Math.min(200, 5L << attempt);
    try {
      Thread.sleep(1 + ThreadLocalRandom.current().nextLong(max));
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
    }
  }
}
