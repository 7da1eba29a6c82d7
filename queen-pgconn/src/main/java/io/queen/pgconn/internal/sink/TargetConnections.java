package io.queen.pgconn.internal.sink;

import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.ConnectDenied;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One sink's connections to its target: from Queen's pool, one per batch, when the target is Queen's database;
 * otherwise one connection of its own to the other database per worker thread, kept across batches. Each keeps its
 * prepared statements, never closed by the code that uses them. A connection is used by one worker thread at a time.
 */
final class TargetConnections {
  /** The longest a statement on the sink's own connection to a target may wait for an answer (pgjdbc socketTimeout). */
  static final int SOCKET_TIMEOUT_S = 120;
  private final ConnectorHost host;
  private final SinkSpec spec;
  private final String password;
  /** Connections to another database, one per worker thread. */
  private final Map<Thread, Connection> external = new ConcurrentHashMap<>();
  private final Map<Connection, Map<String, PreparedStatement>> statements = new ConcurrentHashMap<>();

  TargetConnections(ConnectorHost host, SinkSpec spec, String password) {
    this.host = host;
    this.spec = spec;
    this.password = password;
  }

  Connection open() throws SQLException {
    SinkSpec.Connection cn = spec.connection();
    if (cn == null) {
      return host.dataSource().getConnection();
    }
    Properties p = new Properties();
    p.setProperty("user", cn.user());
    if (password != null) {
      p.setProperty("password", password);
    }
    p.setProperty("sslmode", cn.sslMode());
    p.setProperty("connectTimeout", "10");
    p.setProperty("loginTimeout", "10");
    // a target that stops answering (host down, a NAT that forgot the connection) must fail the batch, not hang its
    // worker while the loop renews the leases: keepalives find a dead peer, and no statement waits longer than this
    p.setProperty("tcpKeepAlive", "true");
    p.setProperty("socketTimeout", String.valueOf(SOCKET_TIMEOUT_S));
    p.setProperty("ApplicationName", "queen-sink-" + spec.name());
    String url = "jdbc:postgresql://" + cn.urlHost() + ":" + cn.port() + "/" + java.net.URLEncoder.encode(cn.database(),
        java.nio.charset.StandardCharsets.UTF_8);
    try {
      return new org.postgresql.Driver().connect(url, p);
    } catch (SQLException e) {
      throw ConnectDenied.atConnect(e);
    }
  }

  /** This worker's connection: its own one to another database, or one from Queen's pool per batch. */
  Connection forWorker() throws SQLException {
    if (spec.connection() == null) {
      Connection c = open();
      c.setAutoCommit(false);
      return c;
    }
    Connection c = external.get(Thread.currentThread());
    if (c == null || c.isClosed()) {
      c = open();
      c.setAutoCommit(false);
      external.put(Thread.currentThread(), c);
    }
    return c;
  }

  void release(Connection c, boolean broken) {
    if (spec.connection() == null) {
      statements.remove(c);
      closeQuietly(c);
    } else if (broken) {
      external.remove(Thread.currentThread(), c);
      statements.remove(c);
      closeQuietly(c);
    }
  }

  private static void closeQuietly(Connection c) {
    try {
      c.close();
    } catch (SQLException | RuntimeException e) {
      // closing a broken connection: nothing to do
    }
  }

  PreparedStatement prepared(Connection c, String sql) throws SQLException {
    Map<String, PreparedStatement> m = statements.computeIfAbsent(c, k -> new HashMap<>());
    PreparedStatement st = m.get(sql);
    if (st == null) {
      st = c.prepareStatement(sql);
      m.put(sql, st);
    }
    return st;
  }

  /** Closes the connections of workers whose threads are gone (a loop that a failed check stopped). */
  void dropDeadWorkers() {
    external.entrySet().removeIf(e -> {
      if (e.getKey().isAlive()) {
        return false;
      }
      statements.remove(e.getValue());
      closeQuietly(e.getValue());
      return true;
    });
  }

  /** Closes every worker's connection to another database (the loop has stopped). */
  void closeAll() {
    for (Connection c : external.values()) {
      closeQuietly(c);
    }
    external.clear();
    statements.clear();
  }
}
