package io.queen.pgconn.internal.source;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.SinkSpec;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashSet;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.postgresql.PGProperty;
import org.postgresql.ds.common.BaseDataSource;

/**
 * The source's two kinds of connection: a normal one for metadata, slot health and reading rows
 * back, and a replication one ({@code replication=database}, simple query mode) for the stream. Both to the
 * document's {@code connection}, or to Queen's own database, whose URL and credentials are read from Queen's
 * DataSource when it is a HikariCP pool or a pgjdbc DataSource; any other DataSource needs a {@code connection}
 * block ({@code replication_connection}). Every connection gets the session settings of {@link Codec#applySession}
 * (UTC and the rest), so the stream and the snapshot print values alike. Never logs the password.
 */
final class SourceConnections {
  /**
   * Connection properties the source sets itself (lower case). pgjdbc lets a URL parameter win over the property of the
   * same name, so these are taken out of the URL read from Queen's DataSource: a pgjdbc DataSource given its URL
   * reports every property at its default ({@code preferQueryMode=extended}, which a replication connection refuses;
   * {@code binaryTransfer=true}; {@code ApplicationName}, by which a stale walsender of the source is found), and an
   * application's URL may carry any of them.
   */
  private static final Set<String> OWN = Set.of("replication", "preferquerymode", "binarytransfer",
      "binarytransferenable", "binarytransferdisable", "assumeminserverversion", "applicationname", "options",
      "connecttimeout", "logintimeout", "tcpkeepalive", "sockettimeout");

  private final String url;
  private final Properties inherited;
  private final String user;
  private final String password;
  private final String sslMode;
  private final String application;

  private SourceConnections(String url, Properties inherited, String user, String password, String sslMode,
      String application) {
    this.url = url;
    this.inherited = inherited;
    this.user = user;
    this.password = password;
    this.sslMode = sslMode;
    this.application = application;
  }

  private SourceConnections(String url, String user, String password, String sslMode, String application) {
    this(url, new Properties(), user, password, sslMode, application);
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
          // the pool's dataSourceProperties go to the driver with its URL (sslmode and the like): so here too
          return new SourceConnections(h.getJdbcUrl(), h.getDataSourceProperties(), h.getUsername(), h.getPassword(),
              null, app);
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
    Properties p = new Properties();
    for (String k : inherited.stringPropertyNames()) {
      if (!OWN.contains(k.toLowerCase(Locale.ROOT))) {
        p.setProperty(k, inherited.getProperty(k));
      }
    }
    p.putAll(Values.sessionSettings()); // text results as PostgreSQL prints them (binaryTransfer off)
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
    Connection c;
    try {
      c = new org.postgresql.Driver().connect(withoutOwnParameters(url, p), p);
    } catch (SQLException e) {
      throw io.queen.pgconn.internal.spec.ConnectDenied.atConnect(e);
    }
    if (c == null) {
      throw new SQLException("not a PostgreSQL URL", "08001");
    }
    return c;
  }

  /**
   * {@code url} without the parameters the source sets itself ({@link #OWN}), nor those {@code props} set (the user
   * and password when known): the rest (hosts, {@code targetServerType}, SSL settings, ...) stays.
   */
  static String withoutOwnParameters(String url, Properties props) {
    int q = url.indexOf('?');
    if (q < 0) {
      return url;
    }
    Set<String> set = new HashSet<>(OWN);
    props.stringPropertyNames().forEach(k -> set.add(k.toLowerCase(Locale.ROOT)));
    StringBuilder kept = new StringBuilder(url.substring(0, q));
    char sep = '?';
    for (String part : url.substring(q + 1).split("&")) {
      int eq = part.indexOf('=');
      String key = URLDecoder.decode(eq < 0 ? part : part.substring(0, eq), StandardCharsets.UTF_8);
      if (part.isEmpty() || set.contains(key.toLowerCase(Locale.ROOT))) {
        continue;
      }
      kept.append(sep).append(part);
      sep = '&';
    }
    return kept.toString();
  }

  /** The database's user name the source runs as (for messages: never the password). */
  String user() {
    return user;
  }

  /** How long a stopping stream waits for its walsender to let go of the slot (a clean close takes milliseconds). */
  static final long WALSENDER_GONE_MS = 2_000;

  /**
   * Polls the slot until a stopped stream's walsender no longer holds it: closing the replication connection ends the
   * walsender, but its process lets go of the slot a moment later. Gives up after {@link #WALSENDER_GONE_MS} (a
   * connection that vanished without a goodbye keeps its walsender until {@code wal_sender_timeout}) or when the normal
   * connection fails; the next start then waits for the slot itself. {@code walsenderPid} 0: nothing to wait for.
   */
  static void awaitWalsenderGone(Connection normal, String slot, int walsenderPid) {
    if (walsenderPid == 0) {
      return;
    }
    long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WALSENDER_GONE_MS);
    try (PreparedStatement st = normal.prepareStatement(
        "select 1 from pg_replication_slots where slot_name = ? and active_pid = ?")) {
      st.setString(1, slot);
      st.setInt(2, walsenderPid);
      while (true) {
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            return;
          }
        }
        if (System.nanoTime() - until > 0) {
          return;
        }
        Thread.sleep(10);
      }
    } catch (SQLException | RuntimeException e) {
      // the normal connection is gone too: nothing to wait with
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
