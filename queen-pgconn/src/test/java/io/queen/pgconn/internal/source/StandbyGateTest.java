package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.testkit.EnabledForPostgresVersion;
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
@EnabledForPostgresVersion(min = 17, reason = "synchronized_standby_slots and failover slots are PostgreSQL 17's")
class StandbyGateTest {
  /** Slots are cluster-wide: each run has its own name. */
  final String slot = "gate_" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffL);
  TestDatabase db;

  @BeforeEach
  void start(TestDatabase db) throws Exception {
    this.db = db;
    sql("select pg_create_physical_replication_slot('" + slot + "', true)");
    setting(slot); // server-wide: the gate reads it with every level (no failover slot here, so nothing else waits)
  }

  @AfterEach
  void stop() throws Exception {
    try {
      setting(null);
    } finally {
      sql("select pg_drop_replication_slot('" + slot + "')");
    }
  }

  /** Sets (or, with null, resets) synchronized_standby_slots and waits until this database's sessions read it. */
  private void setting(String value) throws Exception {
    sql(value == null ? "alter system reset synchronized_standby_slots"
        : "alter system set synchronized_standby_slots = '" + value + "'", "select pg_reload_conf()");
    org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).until(() -> {
      try (Connection c = db.dataSource().getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select current_setting('synchronized_standby_slots')")) {
        rs.next();
        return rs.getString(1).equals(value == null ? "" : value);
      }
    });
  }

  @Test
  void aCommitIsConfirmedOnlyOnceTheNamedStandbyHasIt() throws Exception {
    StandbyGate gate = new StandbyGate(db.dataSource(), List.of(slot), "test", Long.MAX_VALUE);
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
  void aSettingClearedWhileConfirmationsWaitLetsThemGo() throws Exception {
    StandbyGate gate = new StandbyGate(db.dataSource(), List.of(slot), "test", Long.MAX_VALUE);
    sql("create table t2 (v int)", "insert into t2 values (1)");
    assertThat(gate.committed(300)).isEqualTo(StandbyGate.NONE);
    setting(null); // as after a promotion, when it named the old primary's standby
    assertThat(gate.poll()).as("nothing held once no standby is named").isEqualTo(300);
    assertThat(gate.holding()).isFalse();
  }

  @Test
  void aNamedSlotThatDoesNotExistHoldsEveryConfirmationAndSaysSo() throws Exception {
    StandbyGate gate = new StandbyGate(db.dataSource(), List.of(slot, "no_such_standby"), "node - source 's'", 0);
    sql("select pg_replication_slot_advance('" + slot + "', pg_current_wal_lsn())",
        "select pg_create_physical_replication_slot('no_such_standby_" + slot + "')"); // (the setting needs it at set)
    setting(slot + ", no_such_standby_" + slot);
    sql("select pg_drop_replication_slot('no_such_standby_" + slot + "')"); // missing now, still named
    try (LogCapture logs = LogCapture.start()) {
      assertThat(gate.committed(100)).isEqualTo(StandbyGate.NONE);
      assertThat(gate.poll()).isEqualTo(StandbyGate.NONE);
      assertThat(logs.linesWith("WARN", "node - source 's'", slot + ", no_such_standby_" + slot, "confirms nothing"))
          .hasSize(1);
    }
  }

  @Test
  void theSettingIsReadAsAListOfSlotNames() throws Exception {
    assertThat(StandbyGate.parse(null)).isEmpty();
    assertThat(StandbyGate.parse("")).isEmpty();
    assertThat(StandbyGate.parse("standby1")).containsExactly("standby1");
    assertThat(StandbyGate.parse(" a , \"B c\",D ")).as("unquoted names folded to lower case, as PostgreSQL does")
        .containsExactly("a", "B c", "d");
    // a standby is named, but the source's slot is no failover slot of Queen's database: no gate
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
