package io.queen.embedded.internal.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A transaction left open holds the xmin horizon and slows every push, pop and ack as it ages: the node names it (pid,
 * application, user, state; never its statement) once past {@code horizonWarnAfter}, says when it ends, and shows its
 * age as {@code queen.database.horizon.age}.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HorizonWatchTest {

  @Test
  void aForgottenTransactionIsNamedOnceAndItsEndSaid(TestDatabase db) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).meterRegistry(registry)
        .horizonWarnAfter(Duration.ofSeconds(1)).start();
        LogCapture logs = LogCapture.start()) {
      HorizonWatch watch = Watches.horizon(queen);
      queen.queue("h").push(Map.of("i", 1));
      watch.run();
      assertThat(gauge(registry)).isLessThan(1.0);

      int pid;
      try (Connection c = db.dataSource().getConnection()) {
        c.setClientInfo("ApplicationName", "forgotten-report");
        c.setAutoCommit(false);
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
            "select pg_backend_pid(), txid_current(), 'SECRET-STATEMENT-TEXT'")) {
          rs.next();
          pid = rs.getInt(1);
        }
        // the session now sits idle in transaction, holding the horizon, until it is past horizonWarnAfter
        org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(200))
            .pollInSameThread()
            .until(() -> {
              watch.run();
              return gauge(registry) >= 1.0;
            });
        watch.run(); // still the same transaction: no second WARN
        assertThat(logs.linesWith(Watches.here(), "WARN", "has held the database's xmin horizon", "pid " + pid,
            "application 'forgotten-report'", "state 'idle in transaction'", "idle_in_transaction_session_timeout"))
            .hasSize(1);
        assertThat(logs.text()).doesNotContain("SECRET-STATEMENT-TEXT");
        c.commit();
      }
      watch.run();
      assertThat(logs.linesWith(Watches.here(), "INFO", "the transaction that held the xmin horizon (pid " + pid, "no longer does"))
          .hasSize(1);
      assertThat(gauge(registry)).isLessThan(1.0);
    }
  }

  @Test
  void theThresholdIsZeroForOffOrBetweenOneSecondAndADay(TestDatabase db) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(db.dataSource())
        .horizonWarnAfter(Duration.ofMillis(500)).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("horizonWarnAfter must be 0 (off) or between 1 s and 1 day, was 500 ms");
    try (Queen off = EmbeddedQueen.builder().dataSource(db.dataSource()).horizonWarnAfter(Duration.ZERO).start()) {
      Watches.horizon(off).run();
    }
  }

  private static double gauge(SimpleMeterRegistry r) {
    return r.get("queen.database.horizon.age").gauge().value();
  }
}
