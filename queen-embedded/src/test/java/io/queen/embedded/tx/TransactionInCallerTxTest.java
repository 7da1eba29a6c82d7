package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.AckOutcome;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.Queen;
import io.queen.QueueFullException;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** commit(Connection): the bundle inside the application's own JDBC transaction; the caller's commit decides. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TransactionInCallerTxTest {
  private static final KvOptions DAY = Kv.ttl(Duration.ofDays(1));
  private DataSource ds;
  private Queen queen;
  private String q;
  private String ns;

  @BeforeEach
  void start(DataSource ds, TestInfo info) throws SQLException {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("tx2").start();
    String name = info.getTestMethod().orElseThrow().getName();
    q = "q-" + name;
    ns = "ns." + name;
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists app_orders (id text primary key, status text not null)");
    }
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private int appRows(String id) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement st = c.prepareStatement("select count(*) from app_orders where id = ?")) {
      st.setString(1, id);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }

  private static void insertOrder(Connection c, String id) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("insert into app_orders(id, status) values (?, 'paid')")) {
      st.setString(1, id);
      st.executeUpdate();
    }
  }

  @Test
  void autoCommitOnIsRejectedAndLeftAsItWas() throws SQLException {
    try (Connection c = ds.getConnection()) {
      assertThat(c.getAutoCommit()).isTrue();
      assertThatThrownBy(() -> queen.transaction().put(ns, "k", 1, DAY).commit(c))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("auto-commit");
      assertThat(c.getAutoCommit()).isTrue();
    }
    assertThat(queen.kv().get(ns, "k").found()).isFalse();
  }

  @Test
  void callerCommitDecidesAndQueenNeitherCommitsNorChangesAutoCommit() throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      insertOrder(c, "o1");
      CommitResult res = queen.transaction()
          .once(ns, "order:o1", DAY.required())
          .push(q, "o1", Map.of("order", "o1"))
          .commit(c);
      assertThat(res.success()).isTrue();
      assertThat(c.getAutoCommit()).isFalse();

      assertThat(queen.kv().get(ns, "order:o1").found()).as("not visible before the caller commits").isFalse();
      assertThat(appRows("o1")).isZero();
      // (no pop here: it would wait for this open transaction's locks on the new queue, from this same thread)

      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(queen.kv().get(ns, "order:o1").found()).isTrue();
    assertThat(appRows("o1")).isEqualTo(1);
    assertThat(queen.queue(q).consumer().batch(10).pop()).hasSize(1);
  }

  @Test
  void callerRollbackLeavesNothingOfTheBundle() throws SQLException {
    queen.queue(q).push(Map.of("order", "o2"));
    Message m = queen.queue(q).consumer().pop().get(0);
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      insertOrder(c, "o2");
      CommitResult res = queen.transaction()
          .once(ns, "order:o2", DAY.required())
          .push(q + "-out", "o2", Map.of("receipt", "o2"))
          .ack(m)
          .commit(c);
      assertThat(res.success()).isTrue();
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(queen.kv().get(ns, "order:o2").found()).isFalse();
    assertThat(appRows("o2")).isZero();
    assertThat(queen.queue(q + "-out").consumer().batch(10).pop()).isEmpty();
    assertThat(queen.ack(m).outcome()).as("the ack rolled back too: the lease is still ours").isEqualTo(AckOutcome.ACKED);
  }

  @Test
  void lostPreconditionRollsBackOnlyTheBundle() throws SQLException {
    queen.kv().put(ns, "order:o3", Map.of("id", "ch_first"), DAY);
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      insertOrder(c, "o3-audit");
      CommitResult res = queen.transaction()
          .push(q, "o3", Map.of("order", "o3"))
          .once(ns, "order:o3", DAY.required())
          .commit(c);
      assertThat(res.success()).isFalse();
      assertThat(res.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
      assertThat(res.value().get("id").asText()).isEqualTo("ch_first");

      insertOrder(c, "o3-after"); // the caller's transaction is still usable
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(appRows("o3-audit")).isEqualTo(1);
    assertThat(appRows("o3-after")).isEqualTo(1);
    assertThat(queen.queue(q).consumer().batch(10).pop()).as("the bundle's push rolled back to its savepoint").isEmpty();
  }

  @Test
  void lostLeaseRollsBackOnlyTheBundle() throws SQLException {
    queen.queue(q).push(Map.of("n", 1));
    Message zombie = queen.queue(q).consumer().leaseTime(Duration.ofMillis(100)).pop().get(0);
    await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
        .until(() -> queen.queue(q).consumer().pop(), l -> !l.isEmpty());
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      insertOrder(c, "o4");
      CommitResult res = queen.transaction().put(ns, "state", 1, DAY).ack(zombie).commit(c);
      assertThat(res.reason()).isEqualTo(CommitResult.Reason.LEASE_LOST);
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(appRows("o4")).isEqualTo(1);
    assertThat(queen.kv().get(ns, "state").found()).isFalse();
  }

  @Test
  void plainDataSourceTransaction() throws SQLException {
    // the shape a Spring @Transactional method has: one connection, auto-commit off, the framework commits
    queen.queue(q).push(Map.of("order", "o5"));
    Message m = queen.queue(q).consumer().pop().get(0);
    Connection c = ds.getConnection();
    boolean before = c.getAutoCommit();
    try {
      c.setAutoCommit(false);
      insertOrder(c, "o5");
      CommitResult res = queen.transaction().once(ns, "order:o5", DAY.required()).ack(m).commit(c);
      assertThat(res.success()).isTrue();
      c.commit();
    } catch (SQLException | RuntimeException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(before);
      c.close();
    }
    assertThat(appRows("o5")).isEqualTo(1);
    assertThat(queen.kv().get(ns, "order:o5").found()).isTrue();
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
  }

  @Test
  void aFailureIsAnExceptionAndLeavesTheCallerTransactionUsable() throws SQLException {
    queen.queue(q).configure(b -> b.maxSize(1));
    queen.queue(q).push(Map.of("n", 0));
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      insertOrder(c, "o6");
      assertThatThrownBy(() -> queen.transaction().incr(ns, "k", 1, DAY).push(q, "p", Map.of("n", 1)).commit(c))
          .isInstanceOf(QueueFullException.class);
      insertOrder(c, "o6-after"); // the bundle rolled back to its savepoint; the caller's transaction goes on
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(appRows("o6")).isEqualTo(1);
    assertThat(appRows("o6-after")).isEqualTo(1);
    assertThat(queen.kv().get(ns, "k").found()).isFalse();
  }
}
