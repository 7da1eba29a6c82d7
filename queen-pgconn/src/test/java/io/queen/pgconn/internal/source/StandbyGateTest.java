package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The gate that holds a source's confirmations until the standbys of {@code synchronized_standby_slots} have Queen's
 * commit (the failover itself is e2e {@code FailoverIT}). A physical slot reserved by hand stands for a standby: it
 * stays where it was reserved until {@code pg_replication_slot_advance} moves it, as a standby's flush reports would.
 */
@QueenPostgres
class StandbyGateTest {
  /** Slots are cluster-wide: each run has its own name. */
  final String slot = "gate_" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffL);
  TestDatabase db;

  @BeforeEach
  void start(TestDatabase db) throws SQLException {
    this.db = db;
    sql("select pg_create_physical_replication_slot('" + slot + "', true)");
  }

  @AfterEach
  void stop() throws SQLException {
    sql("select pg_drop_replication_slot('" + slot + "')");
  }

  @Test
  void aCommitIsConfirmedOnlyOnceTheNamedStandbyHasIt() throws SQLException {
    StandbyGate gate = StandbyGate.forSlots(db.dataSource(), List.of(slot), "test", Long.MAX_VALUE);
    sql("create table t (v int)", "insert into t values (1)"); // WAL past the slot's reserved position
    assertThat(gate.committed(100)).isEqualTo(StandbyGate.NONE);
    assertThat(gate.holding()).isTrue();
    sql("insert into t values (2)");
    assertThat(gate.committed(200)).isEqualTo(StandbyGate.NONE);
    assertThat(gate.poll()).isEqualTo(StandbyGate.NONE);

    sql("select pg_replication_slot_advance('" + slot + "', pg_current_wal_lsn())"); // the standby caught up
    assertThat(gate.poll()).isEqualTo(200); // both commits: the highest flush
    assertThat(gate.holding()).isFalse();
    assertThat(gate.poll()).isEqualTo(StandbyGate.NONE);
  }

  @Test
  void aNamedSlotThatDoesNotExistHoldsEveryConfirmationAndSaysSo() throws SQLException {
    StandbyGate gate = StandbyGate.forSlots(db.dataSource(), List.of(slot, "no_such_standby"), "node - source 's'", 0);
    sql("select pg_replication_slot_advance('" + slot + "', pg_current_wal_lsn())");
    try (LogCapture logs = LogCapture.start()) {
      assertThat(gate.committed(100)).isEqualTo(StandbyGate.NONE);
      assertThat(gate.poll()).isEqualTo(StandbyGate.NONE);
      assertThat(logs.linesWith("WARN", "node - source 's'", slot + ", no_such_standby", "confirms nothing"))
          .hasSize(1);
    }
  }

  @Test
  void theSettingIsReadAsAListOfSlotNames() throws SQLException {
    assertThat(StandbyGate.parse(null)).isEmpty();
    assertThat(StandbyGate.parse("")).isEmpty();
    assertThat(StandbyGate.parse("standby1")).containsExactly("standby1");
    assertThat(StandbyGate.parse(" a , \"B c\",D ")).as("unquoted names folded to lower case, as PostgreSQL does")
        .containsExactly("a", "B c", "d");
    // the test server names none: no gate, the source confirms as soon as Queen committed
    assertThat(StandbyGate.of(db.dataSource(), "queen_some_source", "test")).isNull();
  }

  private void sql(String... statements) throws SQLException {
    try (Connection c = db.dataSource().getConnection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        if (s.startsWith("select")) {
          try (ResultSet rs = st.executeQuery(s)) {
            rs.next();
          }
        } else {
          st.execute(s);
        }
      }
    }
  }
}
