package io.queen.pgconn.internal.sink;

import io.queen.embedded.spi.ConnectorHost;
import java.sql.SQLException;

/**
 * How the sink reads the target's errors: which refuse a row (a data error: tried, then dead-lettered) and which say
 * the table changed; the text Queen and the logs get (names of objects, values masked) and the text the target's
 * dead letter keeps (PostgreSQL's message as written, beside the data).
 */
final class TargetErrors {
  private TargetErrors() {}

  /**
   * Errors that say the table is not what the sink read at start: a column or the table gone (42703, 42P01), the
   * key the upsert names gone (42P10), a privilege revoked (42501 outside a row's policy check).
   */
  static boolean shapeError(SQLException e) {
    String st = e.getSQLState();
    return "42703".equals(st) || "42P01".equals(st) || "42P10".equals(st) || "42501".equals(st);
  }

  /** A quoted name or value in the primary message of PostgreSQL's error. */
  private static final java.util.regex.Pattern QUOTED = java.util.regex.Pattern.compile("\"[^\"]*\"|'[^']*'");

  /** The SQLState {@link #databaseError} ends with. */
  private static final java.util.regex.Pattern SQLSTATE = java.util.regex.Pattern.compile("; SQLState (\\w{5})$");

  /**
   * A dead letter's error as the target keeps it ({@link #databaseError}), for Queen's record made again from it: the
   * node's rule for Queen's records and logs ({@link ConnectorHost#describe}), quoted text masked in the messages of
   * classes 22 and 23, which may quote a value; the names PostgreSQL reports follow unquoted and stay.
   */
  static String masked(String targetError) {
    java.util.regex.Matcher st = SQLSTATE.matcher(targetError);
    if (st.find() && (st.group(1).startsWith("22") || st.group(1).startsWith("23"))) {
      return QUOTED.matcher(targetError).replaceAll("\"…\"");
    }
    return targetError;
  }

  /** A data error: PostgreSQL refused the row (data, constraint, type); anything else is retried. */
  static boolean isDataError(ConnectorHost host, SQLException e) {
    if (host.isTransient(e)) {
      return false;
    }
    for (SQLException s = e; s != null; s = s.getNextException()) {
      String st = s.getSQLState();
      // only the server's verdict on this row: a driver-side error (no server message) is not the data's fault
      boolean server = !(s instanceof org.postgresql.util.PSQLException pe) || pe.getServerErrorMessage() != null;
      if (server && st != null && (st.startsWith("22") || st.startsWith("23") || st.equals("42804") || rowPolicy(s)
          || st.equals("P0001") || st.equals("2F000") || st.equals("42883")
          || st.equals("54000") // a value too large for its index row
          || st.equals("21000"))) { // a sql-mode statement whose subquery returned more than one row for this one
        return true;
      }
      if (s.getNextException() == s) {
        break;
      }
    }
    return false;
  }

  /**
   * A row refused by a row-level security policy's check (42501) or a view's WITH CHECK OPTION (44000): both come
   * from the executor's check of that row (routine {@code ExecWithCheckOptions}, not translated like the message),
   * unlike a privilege the role lacks on the whole table.
   */
  private static boolean rowPolicy(SQLException s) {
    return s instanceof org.postgresql.util.PSQLException pe && pe.getServerErrorMessage() != null
        && "ExecWithCheckOptions".equals(pe.getServerErrorMessage().getRoutine())
        && ("42501".equals(s.getSQLState()) || "44000".equals(s.getSQLState()));
  }

  /**
   * The database's error for Queen and the logs ({@code FAILED} and {@code DEAD_LETTER} acks, WARN lines): the
   * node's description of it ({@link ConnectorHost#describe}: class, SQLState, PostgreSQL's primary message, quoted
   * values masked in classes 22 and 23) and the names of the constraint, column, type and table PostgreSQL reports;
   * never a detail line, the statement or a value of the payload. A data error of the sink's own: its text.
   */
  static String errorText(ConnectorHost host, Exception e) {
    if (e instanceof SQLException se) {
      SQLException inner = se.getNextException() != null ? se.getNextException() : se;
      StringBuilder d = new StringBuilder(host.describe(inner));
      if (inner instanceof org.postgresql.util.PSQLException pe && pe.getServerErrorMessage() != null) {
        var sm = pe.getServerErrorMessage(); // names of objects, never values
        for (String[] part : new String[][] {{"constraint", sm.getConstraint()}, {"column", sm.getColumn()},
            {"type", sm.getDatatype()}, {"table", sm.getTable()}}) {
          if (part[1] != null) {
            d.append("; ").append(part[0]).append(' ').append(part[1]);
          }
        }
      }
      return d.toString();
    }
    return e.getMessage();
  }

  /**
   * The database's error as PostgreSQL wrote it, for the dead letter's row in the target ({@code
   * queen.sink_dead_letters}, beside the data it is about): the primary message unmasked, then the constraint, column,
   * type and table (schema-qualified) PostgreSQL names, and the SQLState, from pgjdbc's {@code ServerErrorMessage}.
   * No detail, hint or context line (a row's values are there), never the statement. A data error of the sink's own:
   * its text.
   */
  static String databaseError(Exception e) {
    if (!(e instanceof SQLException se)) {
      return e.getMessage();
    }
    SQLException inner = se.getNextException() != null ? se.getNextException() : se;
    if (!(inner instanceof org.postgresql.util.PSQLException pe) || pe.getServerErrorMessage() == null) {
      return "SQLState " + inner.getSQLState(); // not the server's verdict (not a data error): nothing of its text
    }
    var sm = pe.getServerErrorMessage();
    StringBuilder d = new StringBuilder(sm.getMessage() == null ? "" : sm.getMessage());
    String table = sm.getTable() == null ? null : sm.getSchema() == null ? sm.getTable() : sm.getSchema() + "."
        + sm.getTable();
    for (String[] part : new String[][] {{"constraint", sm.getConstraint()}, {"column", sm.getColumn()},
        {"type", sm.getDatatype()}, {"table", table}, {"SQLState", sm.getSQLState()}}) {
      if (part[1] != null) {
        d.append("; ").append(part[0]).append(' ').append(part[1]);
      }
    }
    return d.toString();
  }
}
