package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What Queen needs of the application's pool (docs/configuration.md, "Handing Queen your pool"): enough connections
 * beside the two it keeps, a listener that survives a role's idle_session_timeout, and connections given back as they
 * came.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ApplicationPoolTest {

  @Test
  void aPoolNoBiggerThanWhatTheNodeKeepsIsRefusedAndATightOneWarned(TestDatabase db) {
    try (HikariDataSource two = db.newDataSource(2)) {
      assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(two).nodeId("tiny").start())
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("HikariCP pool of at most 2 connection(s)")
          .hasMessageContaining("keeps 2 of them for its heartbeat and its wake-up listener")
          .hasMessageContaining("at least 4 connections");
      // without the listener one is kept: two leave one for the work, with a WARN
      try (LogCapture logs = LogCapture.start();
          Queen q = EmbeddedQueen.builder().dataSource(two).nodeId("tiny-quiet").listen(false).start()) {
        assertThat(logs.linesWith("WARN", "pool of at most 2 connection(s)", "every push, pop and ack goes through the one"
            + " left")).hasSize(1);
        q.queue("tiny").push(Map.of("i", 1));
        assertThat(q.queue("tiny").consumer().pop()).hasSize(1);
      }
    }
  }

  @Test
  void theListenerOutlivesAnIdleSessionTimeoutAndLeavesThePoolAsItCame(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("alter database " + db.name() + " set idle_session_timeout = '1s'");
    }
    try (HikariDataSource pool = db.newDataSource(4)) {
      String poolsName;
      try (Connection c = pool.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select current_setting('application_name')")) {
        rs.next();
        poolsName = rs.getString(1);
      }
      try (LogCapture logs = LogCapture.start();
          Queen q = EmbeddedQueen.builder().dataSource(pool).nodeId("idle").start()) {
        QueenImpl node = (QueenImpl) q;
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).until(() -> node.wakeups().connected());
        // the database ends sessions idle for 1 s: the listener keeps its connection over 2.5 s all the same
        org.awaitility.Awaitility.await().during(java.time.Duration.ofMillis(2_500))
            .atMost(java.time.Duration.ofSeconds(5)).pollInterval(java.time.Duration.ofMillis(100))
            .until(() -> node.wakeups().connected());
        assertThat(logs.linesWith("WARN", "wake-up listener lost its connection")).isEmpty();
        try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
            "select count(*) from pg_stat_activity where application_name = 'queen-idle-listener'")) {
          rs.next();
          assertThat(rs.getLong(1)).as("the listener named in pg_stat_activity").isEqualTo(1);
        }
      }
      // closed: every connection of the pool is back without a LISTEN, with the database's idle_session_timeout and the
      // pool's application_name
      List<Connection> all = new ArrayList<>();
      try {
        for (int i = 0; i < 4; i++) {
          all.add(pool.getConnection());
        }
        for (Connection c : all) {
          try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
              "select (select count(*) from pg_listening_channels()), current_setting('idle_session_timeout'),"
                  + " current_setting('application_name')")) {
            rs.next();
            assertThat(rs.getLong(1)).isZero();
            assertThat(rs.getString(2)).isEqualTo("1s");
            assertThat(rs.getString(3)).isEqualTo(poolsName);
          }
        }
      } finally {
        for (Connection c : all) {
          c.close();
        }
      }
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("alter database " + db.name() + " reset idle_session_timeout");
      }
    }
  }
}
