package io.queen.embedded.internal.db;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.DatabaseLoginException;
import io.queen.QueenDatabaseException;
import io.queen.embedded.internal.config.ConnectionConfig;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's connections at start: Queen's own HikariCP pool from {@code jdbcUrl(...)}, opened within
 * {@code connectTimeout} and refusing a bad login at once, or the checks of the application's pool.
 */
public final class Pools {
  private static final Logger LOG = LoggerFactory.getLogger(Pools.class);

  private Pools() {}

  /** DataSources that open a connection per call; Queen warns at the start when given one. */
  public static final java.util.Set<String> UNPOOLED = java.util.Set.of("org.postgresql.ds.PGSimpleDataSource",
      "org.postgresql.jdbc2.optional.SimpleDataSource", "org.springframework.jdbc.datasource.DriverManagerDataSource",
      "org.springframework.jdbc.datasource.SimpleDriverDataSource");

  /**
   * An application's HikariCP pool too small for the connections a node keeps for as long as it runs (the heartbeat's,
   * and the wake-up listener's with {@code listen}) is refused: every other call would wait out the pool's timeout. One
   * with fewer than two connections beside them is started with a WARN.
   */
  public static void checkSize(DataSource ds, String nodeId, boolean listen) {
    if (!(ds instanceof HikariDataSource h)) {
      return; // another pool: its size is not known here
    }
    int kept = listen ? 2 : 1;
    int max = h.getMaximumPoolSize();
    String what = listen ? "its heartbeat and its wake-up listener" : "its heartbeat";
    if (max <= kept) {
      throw new IllegalArgumentException("the DataSource is a HikariCP pool of at most " + max + " connection(s), and"
          + " this node keeps " + kept + " of them for " + what + " for as long as it runs: none would be left for"
          + " pushes, pops and acks. Give the pool at least " + (kept + 2) + " connections, plus one per consume worker"
          + " whose handler holds a connection of its own while it calls Queen"
          + " (docs/configuration.md: \"Handing Queen your pool\")");
    }
    if (max < kept + 2) {
      LOG.warn("{} - the DataSource is a HikariCP pool of at most {} connection(s), and this node keeps {} of them for {}:"
          + " every push, pop and ack goes through the one left. Give the pool at least {}", nodeId, max, kept,
          what, kept + 2);
    }
  }

  /** Warns when the application's DataSource opens a new connection for every call. */
  public static void warnIfUnpooled(DataSource ds, String nodeId) {
    if (UNPOOLED.contains(ds.getClass().getName())) {
      LOG.warn("{} - the DataSource given is a {}, which opens a new connection for every call (Queen makes several"
          + " per message, each then costs a login): hand Queen a pool such as HikariCP, or give jdbcUrl(...) and"
          + " Queen runs its own", nodeId, ds.getClass().getSimpleName());
    }
  }

  /**
   * Queen's own pool: every wait for a connection is bounded by {@code connectTimeout} (HikariCP's
   * connection timeout, pgjdbc's connect and login timeouts), and the pool fails at once, within that
   * bound, when the first connection cannot be made: a refused login is a {@link DatabaseLoginException},
   * an unreachable server a transient {@link QueenDatabaseException} naming host and port. Neither
   * carries the password or the URL's parameters.
   */
  public static HikariDataSource open(ConnectionConfig config, String nodeId) {
    long ms = config.connectTimeout().toMillis();
    int seconds = (int) Math.max(1, (ms + 999) / 1000); // pgjdbc takes whole seconds
    HikariConfig hc = new HikariConfig();
    hc.setJdbcUrl(config.jdbcUrl());
    hc.setUsername(config.user());
    hc.setPassword(config.password());
    hc.setMaximumPoolSize(config.poolSize() + 1); // + the heartbeat's own connection
    hc.setPoolName("queen-" + nodeId);
    // Queen's statements are correct at READ COMMITTED only; set on each connection, whatever the database's
    // default_transaction_isolation says (ReadCommitted explains why)
    hc.setTransactionIsolation("TRANSACTION_READ_COMMITTED");
    hc.setConnectionTimeout(ms);
    hc.setValidationTimeout(Math.min(ms, 5_000));
    // as strings: pgjdbc reads only string properties, and an Integer here was ignored (a server that accepted
    // the connection and never answered held the start with no limit)
    hc.addDataSourceProperty("connectTimeout", String.valueOf(seconds));
    hc.addDataSourceProperty("loginTimeout", String.valueOf(seconds));
    // how an operator finds this node's sessions in pg_stat_activity; an ApplicationName in the URL wins
    hc.addDataSourceProperty("ApplicationName", applicationName(nodeId));
    long t0 = System.nanoTime();
    refuseABadLoginAtOnce(config, seconds);
    // the pool's tries get what the probe left of connectTimeout, so a start never waits twice for one host
    hc.setInitializationFailTimeout(Math.max(1, ms - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)));
    try {
      return new HikariDataSource(hc);
    } catch (RuntimeException e) { // HikariPool.PoolInitializationException
      java.sql.SQLException login = Sql.loginFailure(e);
      if (login != null) {
        throw new DatabaseLoginException(config.user(), login.getSQLState(), login);
      }
      java.sql.SQLException refused = Sql.configurationFailure(e);
      if (refused != null) {
        throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " ("
            + Sql.configurationFix(refused) + ")", refused.getSQLState(), false, Sql.sanitize(refused));
      }
      java.sql.SQLException cause = e.getCause() instanceof java.sql.SQLException se ? se : null;
      throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " within connectTimeout "
          + config.connectTimeout(), cause != null ? cause.getSQLState() : null, true, cause != null ? cause : e);
    }
  }

  /**
   * One connection straight from the driver before the pool starts: a login the server refuses (SQLState class 28),
   * a database that does not exist (3D000) or a role that may not connect to it (42501) is refused at once, where the
   * pool would try again every second until connectTimeout (none of them passes by waiting). Any other failure (a
   * server still starting) is left to the pool's tries.
   */
  private static void refuseABadLoginAtOnce(ConnectionConfig config, int seconds) {
    java.util.Properties props = new java.util.Properties();
    if (config.user() != null) {
      props.setProperty("user", config.user());
    }
    if (config.password() != null) {
      props.setProperty("password", config.password());
    }
    props.setProperty("connectTimeout", Integer.toString(seconds));
    props.setProperty("loginTimeout", Integer.toString(seconds));
    try (java.sql.Connection c = new org.postgresql.Driver().connect(config.jdbcUrl(), props)) {
      // reached and accepted: the pool opens its own
    } catch (java.sql.SQLException e) {
      if (e.getSQLState() != null && e.getSQLState().startsWith("28")) {
        throw new DatabaseLoginException(config.user(), e.getSQLState(), e);
      }
      if (Sql.configurationFailure(e) != null) {
        throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " ("
            + Sql.configurationFix(e) + ")", e.getSQLState(), false, Sql.sanitize(e));
      }
    }
  }

  /** The host:port part of a JDBC URL (no database, no parameters), for messages. */
  /** The {@code application_name} of the pool Queen opens: {@code queen-<node>} (PostgreSQL keeps 63 characters). */
  public static String applicationName(String nodeId) {
    return "queen-" + nodeId;
  }

  public static String hostPort(String url) {
    String rest = url.substring("jdbc:postgresql:".length());
    if (!rest.startsWith("//")) {
      return "localhost:5432";
    }
    rest = rest.substring(2);
    int end = rest.length();
    for (char ch : new char[] {'/', '?'}) {
      int i = rest.indexOf(ch);
      if (i >= 0 && i < end) {
        end = i;
      }
    }
    String hp = rest.substring(0, end);
    int at = hp.lastIndexOf('@'); // never echo credentials written into the authority
    return at >= 0 ? hp.substring(at + 1) : hp;
  }
}
