package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.DatabaseLoginException;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.embedded.internal.QueenImpl;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.postgresql.ds.PGSimpleDataSource;

/** A refused login is one clear exception; no wait for a connection outlasts connectTimeout. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConnectTest {

  @Test
  void aRefusedLoginIsOneClearExceptionInBothForms(TestDatabase db) throws Exception {
    // The embedded test server trusts local connections (any password is accepted), so a wrong password cannot be
    // refused here; a role that may not log in is refused the same way (SQLState class 28: 28000 here, 28P01 for a
    // wrong password on a server that checks passwords; both map to DatabaseLoginException).
    String role = "queen_nologin_" + Long.toHexString(System.nanoTime());
    String secret = "s3cret-" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create role " + role + " nologin password '" + secret + "'");
    }
    try {
      long t0 = System.nanoTime();
      assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl() + (db.jdbcUrl().contains("?") ? "&" : "?")
              + "password=" + secret, role, secret).connectTimeout(Duration.ofSeconds(20)).start())
          .isInstanceOf(DatabaseLoginException.class)
          .hasMessageContaining("refused the login of user '" + role + "'").hasMessageContaining("SQLState 28")
          .hasMessageNotContaining(secret)
          .satisfies(e -> assertThat(((DatabaseLoginException) e).sqlState()).startsWith("28"));
      // at once, not after the pool's tries for the whole connectTimeout: a refused login never passes
      assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(10));

      PGSimpleDataSource app = new PGSimpleDataSource();
      app.setUrl(db.jdbcUrl());
      app.setUser(role);
      app.setPassword(secret);
      assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(app).start())
          .isInstanceOf(DatabaseLoginException.class)
          .hasMessageContaining("refused the login of user '" + role + "'").hasMessageNotContaining(secret);
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop role " + role);
      }
    }
  }

  @Test
  void aMissingDatabaseOrAMissingConnectRightIsRefusedAtOnceAndIsNotTransient(TestDatabase db) throws Exception {
    String missing = db.jdbcUrl().replace("/" + db.name(), "/" + db.name() + "_typo");
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(missing, db.user(), db.password()).start())
        .isInstanceOf(QueenDatabaseException.class).isNotInstanceOf(DatabaseLoginException.class)
        .hasMessageContaining("does not exist").hasMessageContaining("fix the database name")
        .satisfies(e -> {
          assertThat(((QueenDatabaseException) e).isTransient()).isFalse();
          assertThat(((QueenDatabaseException) e).sqlState()).isEqualTo("3D000");
        });
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(3)); // not connectTimeout's 5 s

    // the application's pool, which wraps what the server said in its own (transient) timeout
    com.zaxxer.hikari.HikariConfig hc = new com.zaxxer.hikari.HikariConfig();
    hc.setJdbcUrl(missing);
    hc.setUsername(db.user());
    hc.setPassword(db.password());
    hc.setConnectionTimeout(1_000);
    hc.setInitializationFailTimeout(-1);
    try (com.zaxxer.hikari.HikariDataSource app = new com.zaxxer.hikari.HikariDataSource(hc)) {
      assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(app).start())
          .isInstanceOf(QueenDatabaseException.class).hasMessageContaining("does not exist")
          .satisfies(e -> assertThat(((QueenDatabaseException) e).isTransient()).isFalse());
    }

    // a role that may not connect to the database: 42501 at login
    String role = "queen_noconnect_" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create role " + role + " login password 'noconnect-pw'"); // a server that checks passwords
      st.execute("revoke connect on database " + db.name() + " from public");
    }
    try {
      assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl(), role, "noconnect-pw").start())
          .isInstanceOf(QueenDatabaseException.class).hasMessageContaining("CONNECT on the database")
          .satisfies(e -> {
            assertThat(((QueenDatabaseException) e).isTransient()).isFalse();
            assertThat(((QueenDatabaseException) e).sqlState()).isEqualTo("42501");
          });
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("grant connect on database " + db.name() + " to public");
        st.execute("drop role " + role);
      }
    }
  }

  @Test
  void startAgainstNothingFailsWithinTheConnectTimeout() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    String url = "jdbc:postgresql://127.0.0.1:" + port + "/queen";
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(url, "queen", "pw-not-shown")
        .connectTimeout(Duration.ofSeconds(1)).start())
        .isInstanceOf(QueenDatabaseException.class)
        .hasMessageContaining("127.0.0.1:" + port).hasMessageContaining("connectTimeout PT1S")
        .hasMessageNotContaining("pw-not-shown")
        .satisfies(e -> assertThat(((QueenDatabaseException) e).isTransient()).isTrue());
    // bounded (it hung without limit once); loose enough for the first test of a JVM on a busy 2-core machine
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(10));
  }

  /**
   * A server that accepts the connection and never answers: the driver's connect and login timeouts must reach it.
   * They were given to the pool as Integers, which pgjdbc ignores (it reads string properties), and the start hung
   * with no limit.
   */
  @Test
  void startAgainstAServerThatNeverAnswersFailsWithinTheConnectTimeout() throws Exception {
    try (ServerSocket silent = new ServerSocket(0)) { // the kernel completes the handshake; nothing ever replies
      String url = "jdbc:postgresql://127.0.0.1:" + silent.getLocalPort() + "/queen";
      long t0 = System.nanoTime();
      assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(url, "queen", "pw-not-shown")
          .connectTimeout(Duration.ofSeconds(2)).start())
          .isInstanceOf(QueenDatabaseException.class).hasMessageNotContaining("pw-not-shown");
      assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(15));
    }
  }

  @Test
  void aCallThatGetsNoConnectionFailsAfterTheConnectTimeout(TestDatabase db) throws Exception {
    Queen q = EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl(), db.user(), db.password()).poolSize(2).schema("starved")
        .nodeId("starved").listen(false).janitor(false).connectTimeout(Duration.ofSeconds(1)).start();
    List<Connection> held = new ArrayList<>();
    try {
      DataSource pool = ((QueenImpl) q).broker().dataSource();
      while (true) { // take every connection the pool will give
        try {
          held.add(pool.getConnection());
        } catch (SQLException e) {
          break;
        }
      }
      long t0 = System.nanoTime();
      assertThatThrownBy(() -> q.queue("x").push(Map.of("n", 1)))
          .isInstanceOf(QueenDatabaseException.class)
          .hasMessageContaining("push failed")
          .satisfies(e -> assertThat(((QueenDatabaseException) e).isTransient()).isTrue());
      Duration took = Duration.ofNanos(System.nanoTime() - t0);
      assertThat(took).isGreaterThanOrEqualTo(Duration.ofMillis(900)).isLessThan(Duration.ofSeconds(5));
    } finally {
      for (Connection c : held) {
        c.close();
      }
      q.close();
    }
  }

  /** The pool Queen opens names its sessions after the node, so an operator finds them in pg_stat_activity. */
  @Test
  void theOwnPoolsSessionsCarryTheNodesName(TestDatabase db) throws Exception {
    try (Queen q = EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl(), db.user(), db.password()).schema("named")
        .nodeId("named-node").listen(false).janitor(false).start();
        Connection c = db.connection();
        java.sql.PreparedStatement st = c.prepareStatement(
            "select count(*) from pg_stat_activity where application_name = 'queen-named-node'")) {
      q.queue("x").push(Map.of("n", 1));
      try (java.sql.ResultSet rs = st.executeQuery()) {
        rs.next();
        assertThat(rs.getLong(1)).as("the heartbeat's session at least").isPositive();
      }
    }
  }

  /** A DataSource without a pool works, and the start says what it costs (a login per call). */
  @Test
  void aDataSourceWithoutAPoolIsNamedAtTheStart(TestDatabase db) {
    PGSimpleDataSource plain = new PGSimpleDataSource();
    plain.setUrl(db.jdbcUrl());
    plain.setUser(db.user());
    plain.setPassword(db.password());
    try (LogCapture logs = LogCapture.start();
        Queen queen = EmbeddedQueen.builder().dataSource(plain).nodeId("plain-ds").start()) {
      queen.queue("plain").partition("p").push(java.util.Map.of("i", 1));
      assertThat(logs.linesWith("plain-ds", "PGSimpleDataSource", "opens a new connection for every call")).hasSize(1);
    }
  }
}
