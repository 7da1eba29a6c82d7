package io.queen;

/**
 * PostgreSQL failed underneath an operation: the connection was lost, a statement was cancelled, a
 * serialization failure persisted after Queen's bounded retries. Carries the SQLState and the name of
 * the operation (never the statement text or payloads); the {@link java.sql.SQLException} is the
 * cause.
 */
public final class QueenDatabaseException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String operation;
  private final String sqlState;
  private final boolean transientFailure;

  public QueenDatabaseException(String operation, String sqlState, boolean transientFailure, Throwable cause) {
    super(operation + " failed: " + (cause == null ? "unknown" : cause.getMessage())
        + " [SQLState " + sqlState + (transientFailure ? ", transient" : "") + "]", cause);
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
