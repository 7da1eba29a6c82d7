package io.queen.embedded.internal.db;

import io.queen.DatabaseLoginException;
import io.queen.QueenDatabaseException;
import io.queen.QueenException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.postgresql.util.PSQLException;

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
    QUERY_CANCELED("57014", true),
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

  /**
   * Whether retrying the whole transaction may succeed: serialization, deadlock, lock timeout, class 08, and the
   * server running short of something that comes back — class 53 (disk full, out of memory, too many connections)
   * and 57014 (a statement canceled: {@code statement_timeout}, an administrator's cancel). None of these says
   * anything about the data, so none may count against a message.
   */
  public static boolean isTransient(SQLException e) {
    String s = e.getSQLState();
    if (s == null) {
      return false;
    }
    if (s.startsWith("08")) {
      return true; // connection exception
    }
    if (s.startsWith("53")) {
      return true; // insufficient resources: 53100 disk full, 53200 out of memory, 53300 too many connections
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
   * The exception Queen throws for a failed statement: a refused login (SQLState class 28) becomes a
   * {@link DatabaseLoginException}, anything else a {@link QueenDatabaseException} naming the operation, with
   * the SQLState and the server's primary message, sanitised; the cause is {@link #sanitize sanitised} too. A
   * pool that timed out waiting for a connection ({@link java.sql.SQLTransientException}, e.g. HikariCP's
   * after {@code connectTimeout}) is transient whatever its SQLState.
   */
  public static QueenException translate(String operation, SQLException e) {
    SQLException login = loginFailure(e);
    if (login != null) {
      return new DatabaseLoginException(null, login.getSQLState(), sanitize(login));
    }
    SQLException config = configurationFailure(e);
    if (config != null) {
      // a pool's timeout wrapping it would read as transient: waiting does not create a database or grant a right
      return new QueenDatabaseException(operation + " (" + configurationFix(config) + ")", config.getSQLState(), false,
          sanitize(config));
    }
    return new QueenDatabaseException(operation, e.getSQLState(),
        isTransient(e) || e instanceof java.sql.SQLTransientException, sanitize(e));
  }

  /**
   * The refusal of a connection for its configuration in {@code t} or its causes, or {@code null}: a database that
   * does not exist (3D000), or a role without the right to connect to it (42501, which PostgreSQL reports at login
   * for a missing CONNECT privilege). Retrying does not help either; the fix is the operator's.
   */
  public static SQLException configurationFailure(Throwable t) {
    SQLException found = null;
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException se && ("3D000".equals(se.getSQLState()) || "42501".equals(se.getSQLState()))) {
        found = se;
      }
    }
    return found;
  }

  /** What the operator does about a {@link #configurationFailure}. */
  public static String configurationFix(SQLException e) {
    return "3D000".equals(e.getSQLState())
        ? "the database named in the connection does not exist on that server: fix the database name, or create it"
        : "the role lacks a privilege Queen needs (CONNECT on the database, CREATE for Queen's schema, or the rights on"
            + " its tables): grant it, or connect as a role that has it";
  }

  /**
   * The refused login (SQLState class 28) in {@code t} or its causes, or {@code null}: the innermost one,
   * which is the server's own (a pool's timeout exception copies the SQLState of the failure under it, but
   * not the server's message that names the user).
   */
  public static SQLException loginFailure(Throwable t) {
    SQLException found = null;
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException se && se.getSQLState() != null && se.getSQLState().startsWith("28")) {
        found = se;
      }
    }
    return found;
  }

  /**
   * A copy of a JDBC exception that holds no data: the message is the server's primary message only
   * (pgjdbc's message adds the Detail, Hint and Where lines, which can quote the values of a row, the
   * text of a payload or of the statement), with quoted literals redacted for data errors (SQLState
   * classes 22 and 23, e.g. {@code invalid input syntax for type integer: "…"}). SQLState, error code
   * and stack trace are kept; chained and suppressed exceptions are sanitised the same way, so a logged
   * stack trace prints nothing more than the message.
   */
  public static SQLException sanitize(SQLException e) {
    if (e instanceof Sanitized s) {
      return s;
    }
    SQLException out = new Sanitized(safeMessage(e), e.getSQLState(), e.getErrorCode(), e.getClass().getName());
    out.setStackTrace(e.getStackTrace());
    Throwable cause = e.getCause();
    if (cause instanceof SQLException sc) {
      out.initCause(sanitize(sc));
    } else if (cause != null) {
      out.initCause(safeCopy(cause));
    }
    for (Throwable sup : e.getSuppressed()) {
      out.addSuppressed(sup instanceof SQLException ss ? sanitize(ss) : safeCopy(sup));
    }
    SQLException next = e.getNextException();
    if (next != null && next != e) {
      out.setNextException(sanitize(next));
    }
    return out;
  }

  /** A one-line description of a failure for a log line: no payloads, no statement text, no detail lines. */
  public static String describe(Throwable t) {
    if (t instanceof SQLException se) {
      return sanitize(se).toString();
    }
    if (t instanceof io.queen.QueenException) {
      return t.toString(); // Queen's own messages hold no payloads, and their causes are sanitised
    }
    return t.getClass().getName(); // a message Queen did not write may hold anything
  }

  private static String safeMessage(SQLException e) {
    if (e instanceof java.sql.BatchUpdateException) {
      // pgjdbc's own message quotes the failed entry: the statement text with its parameter values
      SQLException next = e.getNextException();
      String why = next != null && next != e ? safeMessage(next) : null;
      return why == null ? "a batch entry failed" : "a batch entry failed: " + why;
    }
    String msg = null;
    if (e instanceof PSQLException pe && pe.getServerErrorMessage() != null) {
      msg = pe.getServerErrorMessage().getMessage();
    }
    if (msg == null) {
      msg = e.getMessage();
    }
    if (msg == null) {
      return null;
    }
    int nl = msg.indexOf('\n');
    if (nl >= 0) {
      msg = msg.substring(0, nl); // pgjdbc's "Detail:", "Hint:", "Where:" lines
    }
    String state = e.getSQLState();
    if (state != null && (state.startsWith("22") || state.startsWith("23"))) {
      msg = QUOTED.matcher(msg).replaceAll("\"…\"");
    }
    return msg;
  }

  private static final Pattern QUOTED = Pattern.compile("\"[^\"]*\"|'[^']*'");

  /**
   * A non-JDBC cause: an I/O error under a lost connection keeps its message (a transport failure holds
   * no data); anything else keeps its class and stack, not its message.
   */
  private static Throwable safeCopy(Throwable t) {
    String m = t instanceof java.io.IOException && t.getMessage() != null && t.getMessage().indexOf('\n') < 0
        ? t.getMessage() : "(message not shown)";
    Sanitized copy = new Sanitized(t.getClass().getName() + ": " + m, null, 0, t.getClass().getName());
    copy.setStackTrace(t.getStackTrace());
    if (t.getCause() != null && t.getCause() != t) {
      copy.initCause(t.getCause() instanceof SQLException sc ? sanitize(sc) : safeCopy(t.getCause()));
    }
    return copy;
  }

  /**
   * For logging a handler's failure: the application's own exceptions as they are (their messages are the
   * application's text, and an operator needs them), but any JDBC exception in the chain reduced to its
   * primary message, since PostgreSQL's detail lines can quote the data.
   */
  public static Throwable forLog(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException) {
        return keepMessages(t);
      }
    }
    return t;
  }

  private static Throwable keepMessages(Throwable t) {
    if (t instanceof SQLException se) {
      return sanitize(se);
    }
    Relabelled copy = new Relabelled(t.toString());
    copy.setStackTrace(t.getStackTrace());
    if (t.getCause() != null && t.getCause() != t) {
      copy.initCause(keepMessages(t.getCause()));
    }
    return copy;
  }

  /** The message of a failure that is kept (as a dead letter's error): JDBC exceptions reduced to their primary message. */
  public static String errorText(Throwable t) {
    if (t instanceof SQLException se) {
      String m = sanitize(se).getMessage();
      return m != null ? m : se.getClass().getName();
    }
    String m = t.getMessage();
    return m != null ? m : t.getClass().getName();
  }

  /** A copy of a non-JDBC exception whose chain held a JDBC exception; prints as the original did. */
  static final class Relabelled extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String text;

    Relabelled(String text) {
      super(text);
      this.text = text;
    }

    @Override
    public String toString() {
      return text;
    }
  }

  /** A sanitised JDBC exception; {@code originalClass} names what it replaces. */
  static final class Sanitized extends SQLException {
    private static final long serialVersionUID = 1L;
    private final String originalClass;

    Sanitized(String message, String sqlState, int errorCode, String originalClass) {
      super(message, sqlState, errorCode);
      this.originalClass = originalClass;
    }

    /** The class of the exception this one replaces, e.g. {@code org.postgresql.util.PSQLException}. */
    String originalClass() {
      return originalClass;
    }

    @Override
    public String toString() {
      String m = getLocalizedMessage();
      return "SQLException (sanitised " + originalClass + (getSQLState() != null ? ", SQLState " + getSQLState() : "")
          + ")" + (m != null ? ": " + m : "");
    }
  }

  /**
   * No JIT and no parallel plan for the rest of the caller's transaction, for a statement Queen sends itself whose
   * estimate can pass {@code jit_above_cost} with the data (deleting a queue's messages): a compile costs tens of
   * milliseconds, and the statement is a plain delete through an index.
   */
  public static void noJit(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select set_config('jit', 'off', true),"
        + " set_config('max_parallel_workers_per_gather', '0', true)")) {
      st.execute();
    }
  }

  /**
   * Turns sequential scans off for the rest of the caller's transaction, for reads that must go through an index
   * whatever the statistics say. JIT and parallel plans go off with them: a disabled sequential scan that stays in a
   * plan adds 1e10 to its estimate on PostgreSQL 15 to 17, past {@code jit_above_cost}, and a server with JIT would
   * compile the statement (tens of milliseconds) on every run.
   */
  public static void indexPlansOnly(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select set_config('enable_seqscan', 'off', true),"
        + " set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)")) {
      st.execute();
    }
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
