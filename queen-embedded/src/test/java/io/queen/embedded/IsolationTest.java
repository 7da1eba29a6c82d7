package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Queen's statements are correct at READ COMMITTED only. An application pool (or database) that defaults to REPEATABLE
 * READ or SERIALIZABLE once left a pushed message stored and never delivered (lag 0, no error), made two nodes starting
 * together both migrate, and made hot KV keys throw 40001. Queen now sets READ COMMITTED on what it borrows, and refuses
 * to join a caller's transaction at a stricter level.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class IsolationTest {

  private static HikariDataSource pool(TestDatabase db, String isolation) {
    HikariConfig c = new HikariConfig();
    c.setJdbcUrl(db.jdbcUrl());
    c.setUsername(db.user());
    c.setPassword(db.password());
    c.setMaximumPoolSize(8);
    c.setTransactionIsolation(isolation);
    return new HikariDataSource(c);
  }

  /**
   * The application's deterministic reproduction: a push that waits for its partition while an acknowledgement drains
   * it, and commits after, must flag the consumer, or its message is never delivered.
   */
  @Test
  void aPushThatWaitedWhileAnAckDrainedItsPartitionIsDeliveredUnderARepeatableReadPool(TestDatabase db) throws Exception {
    ExecutorService ex = Executors.newSingleThreadExecutor();
    try (HikariDataSource ds = pool(db, "TRANSACTION_REPEATABLE_READ"); LogCapture logs = LogCapture.start();
        Queen q = EmbeddedQueen.builder().dataSource(ds).nodeId("rr").start();
        Connection x = db.connection()) {
      assertThat(logs.linesWith("WARN", "default to repeatable read", "TRANSACTION_READ_COMMITTED")).hasSize(1);
      q.queue("s").partition("p").push(Map.of("n", 1));
      List<Message> m1 = q.queue("s").group("g").subscription(SubscriptionMode.ALL).pop();
      assertThat(m1).hasSize(1);
      x.setAutoCommit(false);
      try (Statement st = x.createStatement()) {
        st.execute("select 1 from queen.partitions where name = 'p' for share"); // the push waits for this
      }
      Future<List<PushResult>> push2 = ex.submit((Callable<List<PushResult>>) () ->
          q.queue("s").push(List.of(PushItem.of("p", Map.of("n", 2)))));
      LockWaiters.awaitWaiting(db.dataSource(), "%push%", 1, push2::isDone);
      assertThat(push2.isDone()).as("the push waits for the partition").isFalse();
      assertThat(q.ack(m1.get(0)).success()).isTrue(); // drains the partition while the push waits
      x.commit();
      assertThat(push2.get(10, TimeUnit.SECONDS)).hasSize(1);
      List<Message> m2 = q.queue("s").group("g").waitFor(Duration.ofSeconds(5)).pop();
      assertThat(m2).as("the second message is delivered, not stranded").hasSize(1);
      assertThat(m2.get(0).payload().get("n").asInt()).isEqualTo(2);
    } finally {
      ex.shutdownNow();
    }
  }

  /** Two nodes starting together on a new schema under a serializable database default: one migrates, both start. */
  @Test
  void nodesStartingTogetherOnANewSchemaUnderASerializableDatabaseBothStart(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("alter database " + db.name() + " set default_transaction_isolation = 'serializable'");
    }
    ExecutorService ex = Executors.newFixedThreadPool(2);
    List<Queen> started = new ArrayList<>();
    try (HikariDataSource ds = pool(db, null)) { // the database's default applies
      try {
        List<Future<Queen>> fs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          String node = "ser-" + i;
          fs.add(ex.submit(() -> EmbeddedQueen.builder().dataSource(ds).schema("fresh_schema").nodeId(node).start()));
        }
        for (Future<Queen> f : fs) {
          started.add(f.get(60, TimeUnit.SECONDS));
        }
        started.get(0).queue("x").push(Map.of("i", 1));
        assertThat(started.get(1).queue("x").consumer().pop()).hasSize(1);
      } finally {
        started.forEach(Queen::close); // the nodes before the pool they use, as an application closes them
      }
    } finally {
      ex.shutdownNow();
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("alter database " + db.name() + " reset default_transaction_isolation");
      }
    }
  }

  /** A caller's transaction at REPEATABLE READ is not joined: the same hazard, and the caller must choose. */
  @Test
  void commitOnACallersRepeatableReadTransactionIsRefusedAndChangesNothing(TestDatabase db) throws Exception {
    try (Queen q = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("join").start();
        Connection c = db.dataSource().getConnection()) {
      c.setAutoCommit(false);
      c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
      var tx = q.transaction().push("joined", "a", Map.of("i", 1));
      assertThatThrownBy(() -> tx.commit(c)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("needs the caller's transaction at READ COMMITTED, and it is at repeatable read")
          .hasMessageContaining("Nothing was done");
      c.rollback();
      c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
      assertThat(tx.commit(c).success()).as("the same bundle, once the caller runs at READ COMMITTED").isTrue();
      c.commit();
      assertThat(q.queue("joined").consumer().pop()).hasSize(1);
    }
  }

  /** The pool Queen opens for jdbcUrl(...) runs at READ COMMITTED whatever the database's default says. */
  @Test
  void queensOwnPoolIsReadCommittedUnderARepeatableReadDatabase(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("alter database " + db.name() + " set default_transaction_isolation = 'repeatable read'");
    }
    try (Queen q = EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl(), db.user(), db.password()).nodeId("own").start()) {
      q.queue("own").push(Map.of("i", 1));
      assertThat(level(db)).as("the database's default, for other sessions").isEqualTo("repeatable read");
      try (Connection c = ((io.queen.embedded.internal.QueenImpl) q).broker().dataSource().getConnection();
          Statement st = c.createStatement(); ResultSet rs = st.executeQuery("show transaction_isolation")) {
        rs.next();
        assertThat(rs.getString(1)).isEqualTo("read committed");
      }
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("alter database " + db.name() + " reset default_transaction_isolation");
      }
    }
  }

  private static String level(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("show transaction_isolation")) {
      rs.next();
      return rs.getString(1);
    }
  }
}
