package io.queen;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * PostgreSQL refused the login (SQLState class 28: {@code 28P01} wrong password, {@code 28000} a role that
 * does not exist or may not log in). Thrown by {@code start()} whether Queen opens its own pool or uses the
 * application's {@code DataSource}, and by any later call that needs a new connection (a password rotated
 * under a running node). Never retried: the same credentials fail the same way.
 *
 * <p>The message names the user (when known) and the SQLState, never the password nor the URL's
 * parameters; the driver's exception is the cause.
 */
public final class DatabaseLoginException extends QueenException {
  private static final long serialVersionUID = 1L;
  private static final Pattern QUOTED_USER = Pattern.compile("(?:user|role) \"([^\"]{1,128})\"");
  private final String user;
  private final String sqlState;

  /**
   * @param user the user that tried to log in, or {@code null} to take it from the server's message
   * @param sqlState the SQLState PostgreSQL reported
   * @param cause the driver's exception
   */
  public DatabaseLoginException(String user, String sqlState, Throwable cause) {
    super("PostgreSQL refused the login" + (resolve(user, cause) != null ? " of user '" + resolve(user, cause) + "'" : "")
        + " (SQLState " + sqlState + "): check the user and password", cause);
    this.user = resolve(user, cause);
    this.sqlState = sqlState;
  }

  private static String resolve(String user, Throwable cause) {
    return user != null ? user : userIn(cause);
  }

  private static String userIn(Throwable cause) {
    if (cause == null || cause.getMessage() == null) {
      return null;
    }
    Matcher m = QUOTED_USER.matcher(cause.getMessage());
    return m.find() ? m.group(1) : null;
  }

  /** The user that was refused, or {@code null} when neither Queen nor the server's message named it. */
  public String user() {
    return user;
  }

  /** The SQLState PostgreSQL reported ({@code 28P01} or {@code 28000}). */
  public String sqlState() {
    return sqlState;
  }
}
