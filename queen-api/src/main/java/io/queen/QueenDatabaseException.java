package io.queen;

/**
 * PostgreSQL failed underneath an operation: the connection was lost, a statement was cancelled, a
 * serialization failure persisted after Queen's bounded retries. Carries the SQLState and the name of
 * the operation, and the server's primary message only: never the statement text, payloads or the
 * server's Detail, Hint and Where lines (which can quote row values), and quoted literals of data
 * errors (SQLState classes 22 and 23) are redacted. The cause is a sanitised copy of the driver's
 * {@link java.sql.SQLException}: the same SQLState, error code and stack trace, the same sanitised
 * message, so a logged stack trace prints nothing more.
 *
 * <p>Not final: a push that Queen gave up on after its connection was lost throws the subclass
 * {@link PushOutcomeUnknownException}, which also carries the items to push again.
 */
public class QueenDatabaseException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String operation;
  private final String sqlState;
  private final boolean transientFailure;

  public QueenDatabaseException(String operation, String sqlState, boolean transientFailure, Throwable cause) {
    this(operation, sqlState, transientFailure, cause, "");
  }

  /** For subclasses: the same message with {@code more} appended (it must not hold payloads or statement text). */
  protected QueenDatabaseException(String operation, String sqlState, boolean transientFailure, Throwable cause,
      String more) {
    super(operation + " failed: " + (cause == null ? "unknown" : cause.getMessage())
        + " [SQLState " + sqlState + (transientFailure ? ", transient" : "") + "]" + more, cause);
    this.operation = operation;
    this.sqlState = sqlState;
    this.transientFailure = transientFailure;
  }

  /** The name of the Queen operation that failed, e.g. {@code push} or {@code ack}. */
  public String operation() {
    return operation;
  }

  /** The SQLState PostgreSQL reported, or {@code null}. */
  public String sqlState() {
    return sqlState;
  }

  /** True when retrying the same call later may succeed (connection loss, serialization failure). */
  public boolean isTransient() {
    return transientFailure;
  }
}
