package io.queen.embedded.internal.db;

import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.slf4j.LoggerFactory;

/**
 * Queen's statements are correct at READ COMMITTED only, and this makes sure they run at it, whatever the application's
 * pool or database says.
 *
 * <p>Why: a push's update of the consumer flags must see an acknowledgement that committed while the push waited for its
 * partition's lock, and the migrator must see the schema version another node wrote while it waited for the migration
 * lock. At READ COMMITTED every statement of a function takes a fresh snapshot after the lock; at REPEATABLE READ or
 * SERIALIZABLE the whole call reads one snapshot taken before it waited, so a pushed message could be stored with no
 * consumer flagged (never delivered, lag 0), and two nodes starting together could both migrate. A pool or database
 * that defaults to a stricter level ({@code transactionIsolation} of HikariCP, {@code default_transaction_isolation})
 * is therefore wrapped: each connection Queen borrows is set to READ COMMITTED (HikariCP puts its own level back when
 * the connection returns; a pool that does not leaves it at READ COMMITTED for its next borrower). The pool Queen opens itself ({@code jdbcUrl}) is created at READ COMMITTED.
 */
public final class ReadCommitted implements DataSource {
  private static final org.slf4j.Logger LOG = LoggerFactory.getLogger(ReadCommitted.class);
  private final DataSource delegate;

  private ReadCommitted(DataSource delegate) {
    this.delegate = delegate;
  }

  /**
   * {@code ds} itself when its connections default to READ COMMITTED (or READ UNCOMMITTED, which PostgreSQL runs as
   * READ COMMITTED), else a wrapper that sets it on each borrow.
   */
  public static DataSource ensure(DataSource ds, String node) {
    int level;
    try (Connection c = ds.getConnection()) {
      level = c.getTransactionIsolation();
    } catch (SQLException e) {
      throw Sql.translate("start", e);
    }
    if (level == Connection.TRANSACTION_READ_COMMITTED || level == Connection.TRANSACTION_READ_UNCOMMITTED) {
      return ds; // PostgreSQL runs READ UNCOMMITTED as READ COMMITTED
    }
    LOG.warn("{} - the DataSource's connections default to {}; Queen's statements need READ COMMITTED (under a stricter"
        + " level a pushed message could be left undelivered), so Queen sets it on every connection it borrows, at the"
        + " cost of two more round trips each. Give Queen a pool at READ COMMITTED (HikariCP: transactionIsolation ="
        + " TRANSACTION_READ_COMMITTED), or jdbcUrl(...)", node, name(level));
    return new ReadCommitted(ds);
  }

  /** The JDBC level as PostgreSQL names it. */
  public static String name(int level) {
    return switch (level) {
      case Connection.TRANSACTION_READ_UNCOMMITTED -> "read uncommitted";
      case Connection.TRANSACTION_READ_COMMITTED -> "read committed";
      case Connection.TRANSACTION_REPEATABLE_READ -> "repeatable read";
      case Connection.TRANSACTION_SERIALIZABLE -> "serializable";
      default -> "level " + level;
    };
  }

  private static Connection readCommitted(Connection c) throws SQLException {
    try {
      c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
      return c;
    } catch (SQLException | RuntimeException e) {
      try {
        c.close();
      } catch (SQLException suppressed) {
        e.addSuppressed(suppressed);
      }
      throw e;
    }
  }

  @Override
  public Connection getConnection() throws SQLException {
    return readCommitted(delegate.getConnection());
  }

  @Override
  public Connection getConnection(String username, String password) throws SQLException {
    return readCommitted(delegate.getConnection(username, password));
  }

  @Override
  public PrintWriter getLogWriter() throws SQLException {
    return delegate.getLogWriter();
  }

  @Override
  public void setLogWriter(PrintWriter out) throws SQLException {
    delegate.setLogWriter(out);
  }

  @Override
  public void setLoginTimeout(int seconds) throws SQLException {
    delegate.setLoginTimeout(seconds);
  }

  @Override
  public int getLoginTimeout() throws SQLException {
    return delegate.getLoginTimeout();
  }

  @Override
  public Logger getParentLogger() throws SQLFeatureNotSupportedException {
    return delegate.getParentLogger();
  }

  @Override
  public <T> T unwrap(Class<T> iface) throws SQLException {
    return iface.isInstance(delegate) ? iface.cast(delegate) : delegate.unwrap(iface);
  }

  @Override
  public boolean isWrapperFor(Class<?> iface) throws SQLException {
    return iface.isInstance(delegate) || delegate.isWrapperFor(iface);
  }
}
