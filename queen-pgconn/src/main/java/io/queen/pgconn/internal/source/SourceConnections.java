package io.queen.pgconn.internal.source;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.SinkSpec;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Properties;
import javax.sql.DataSource;
import org.postgresql.PGProperty;
import org.postgresql.ds.common.BaseDataSource;

/**
 * The source's two kinds of connection (cdc.md §2.1): a normal one for metadata, slot health and reading rows
 * back, and a replication one ({@code replication=database}, simple query mode) for the stream. Both to the
 * document's {@code connection}, or to Queen's own database, whose URL and credentials are read from Queen's
 * DataSource when it is a HikariCP pool or a pgjdbc DataSource; any other DataSource needs a {@code connection}
 * block ({@code replication_connection}). Every connection gets the session settings of {@link Codec#applySession}
 * (UTC and the rest), so the stream and the snapshot print values alike. Never logs the password.
 */
final class SourceConnections {
  private final String url;
  private final String user;
  private final String password;
  private final String sslMode;
  private final String application;

  private SourceConnections(String url, String user, String password, String sslMode, String application) {
    this.url = url;
    this.user = user;
    this.password = password;
    this.sslMode = sslMode;
    this.application = application;
  }

  /** Thrown when the connection parameters cannot be found; carries the code. */
  static final class Unavailable extends Exception {
    private static final long serialVersionUID = 1L;
    final ErrorCode code;

    Unavailable(ErrorCode code, String why) {
      super(why, null, false, false);
      this.code = code;
    }
  }

  /** The {@code application_name} of every connection of the source (its walsender's too), on every node. */
  static String applicationName(SourceSpec spec) {
    return "queen-source-" + spec.name();
  }

  static SourceConnections of(SourceSpec spec, String password, DataSource queens) throws Unavailable {
    String app = applicationName(spec);
    SinkSpec.Connection cn = spec.connection();
    if (cn != null) {
      String url = "jdbc:postgresql://" + cn.urlHost() + ":" + cn.port() + "/"
          + URLEncoder.encode(cn.database(), StandardCharsets.UTF_8);
      return new SourceConnections(url, cn.user(), password, cn.sslMode(), app);
    }
    try {
      if (!(queens instanceof HikariDataSource) && queens.isWrapperFor(HikariDataSource.class)) {
        queens = queens.unwrap(HikariDataSource.class); // Queen's READ COMMITTED wrapper of the application's pool
      }
      if (queens instanceof HikariDataSource h) {
        if (h.getJdbcUrl() != null) {
          return new SourceConnections(h.getJdbcUrl(), h.getUsername(), h.getPassword(), null, app);
        }
        if (h.getDataSource() instanceof BaseDataSource b) {
          return new SourceConnections(b.getUrl(), b.getUser(), b.getPassword(), null, app);
        }
      }
      if (queens instanceof BaseDataSource b) {
        return new SourceConnections(b.getUrl(), b.getUser(), b.getPassword(), null, app);
      }
      if (queens.isWrapperFor(BaseDataSource.class)) {
        BaseDataSource b = queens.unwrap(BaseDataSource.class);
        return new SourceConnections(b.getUrl(), b.getUser(), b.getPassword(), null, app);
      }
    } catch (SQLException | RuntimeException e) {
      // not a DataSource we can read: fall through
    }
    throw new Unavailable(ErrorCode.REPLICATION_CONNECTION, "Queen's DataSource (" + queens.getClass().getSimpleName()
        + ") does not tell its URL and credentials");
  }

  private Properties base() {
    Properties p = Values.sessionSettings(); // text results as PostgreSQL prints them (binaryTransfer off)
    if (user != null) {
      p.setProperty("user", user);
    }
    if (password != null) {
      p.setProperty("password", password);
    }
    if (sslMode != null) {
      p.setProperty("sslmode", sslMode);
    }
    p.setProperty("connectTimeout", "10");
    p.setProperty("loginTimeout", "10");
    p.setProperty("tcpKeepAlive", "true"); // a peer gone without a word is noticed
    p.setProperty("ApplicationName", application);
    return p;
  }

  /** A normal connection, auto-commit on, with the session settings applied. */
  Connection normal(Codec codec) throws SQLException {
    return withSession(connect(base()), codec);
  }

  /** A replication connection (walsender, database mode) with the session settings applied. */
  Connection replication(Codec codec) throws SQLException {
    Properties p = base();
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "9.4");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    return withSession(connect(p), codec);
  }

  /** {@code c} with the session settings applied; closed when they cannot be. */
  private static Connection withSession(Connection c, Codec codec) throws SQLException {
    try {
      codec.applySession(c);
      return c;
    } catch (SQLException | RuntimeException e) {
      c.close();
      throw e;
    }
  }

  private Connection connect(Properties p) throws SQLException {
    Connection c = new org.postgresql.Driver().connect(url, p);
    if (c == null) {
      throw new SQLException("not a PostgreSQL URL", "08001");
    }
    return c;
  }

  /** The database's user name the source runs as (for messages: never the password). */
  String user() {
    return user;
  }
}
