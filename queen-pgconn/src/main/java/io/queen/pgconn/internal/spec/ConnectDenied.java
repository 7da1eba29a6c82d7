package io.queen.pgconn.internal.spec;

import java.sql.SQLException;

/**
 * The server refused to open a connection because the role may not connect to the database (SQLState 42501 at
 * login: no CONNECT privilege). Thrown only where connections are opened, so that this refusal, which an operator
 * fixes with a GRANT, is not mistaken for a privilege a statement lacks later (the same SQLState).
 */
public final class ConnectDenied extends SQLException {
  private static final long serialVersionUID = 1L;

  private ConnectDenied(SQLException refused) {
    super(refused.getMessage() == null ? "permission denied for the database"
        : refused.getMessage().lines().findFirst().orElse(""), refused.getSQLState(), refused.getErrorCode(), refused);
  }

  /** {@code e} as a {@link ConnectDenied} when it is a 42501 raised while a connection was opened, else itself. */
  public static SQLException atConnect(SQLException e) {
    return "42501".equals(e.getSQLState()) ? new ConnectDenied(e) : e;
  }
}
