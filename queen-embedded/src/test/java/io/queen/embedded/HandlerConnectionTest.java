package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.DeadLetter;
import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A transactional handler writes the application's own table on {@code tx.connection()}: its rows, its marker and
 * the acknowledgement are one commit, and a bundle that does not commit takes the rows with it. A plain handler that
 * commits the acknowledgement inside its own transaction ({@code commit(connection)}) is not acknowledged again.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class HandlerConnectionTest {

  private static void sql(TestDatabase db, String... statements) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  private static long count(TestDatabase db, String query) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static void pushOrders(Queen queen, String q, int partitions, int each) {
    for (int p = 0; p < partitions; p++) {
      List<Object> payloads = new ArrayList<>();
      for (int i = 0; i < each; i++) {
        payloads.add(Map.of("id", p * 1000 + i));
      }
      queen.queue(q).partition("c" + p).pushAll(payloads);
    }
  }

  private static void ship(Connection c, Message m) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("insert into shipments (order_id, part) values (?, ?)")) {
      st.setLong(1, m.payload().get("id").asLong());
      st.setString(2, m.partition());
      st.executeUpdate();
    }
  }

  private static long lag(Queen queen, String q, String group) {
    return queen.status().queue(q).groups().stream().filter(g -> g.name().equals(group)).findFirst().orElseThrow().lag();
  }

  @Test
  void theHandlersRowsItsMarkerAndTheAckAreOneCommit(TestDatabase db) throws Exception {
    sql(db, "drop table if exists shipments", "create table shipments (order_id bigint primary key, part text not null)");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100)).start()) {
      pushOrders(queen, "orders0", 4, 10);
      try (Subscription s = queen.queue("orders0").group("ship").subscription(SubscriptionMode.ALL).concurrency(3)
          .batch(5).consumeInTransaction((m, tx) -> {
            ship(tx.connection(), m);
            tx.once(m.queue(), "order:" + m.payload().get("id").asLong(), Kv.ttl(Duration.ofHours(1)).required());
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 40);
        assertThat(s.failed()).isZero();
        assertThat(s.alreadyDone()).isZero();
      }
      assertThat(count(db, "select count(*) from shipments")).isEqualTo(40);
      assertThat(lag(queen, "orders0", "ship")).isZero();
      // the batch form: one connection for the batch, one commit with the batch's ack
      try (Subscription s = queen.queue("orders0").group("audit").subscription(SubscriptionMode.ALL).batch(10)
          .consumeBatchInTransaction((batch, tx) -> {
            try (PreparedStatement st = tx.connection().prepareStatement("update shipments set part = part || '+'"
                + " where order_id = ?")) {
              for (Message m : batch) {
                st.setLong(1, m.payload().get("id").asLong());
                st.addBatch();
              }
              st.executeBatch();
            }
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 40);
      }
      assertThat(count(db, "select count(*) from shipments where part like '%+' and part not like '%++'")).isEqualTo(40);
    }
  }

  @Test
  void aBundleThatDoesNotCommitTakesTheHandlersRowsWithIt(TestDatabase db) throws Exception {
    sql(db, "drop table if exists shipments", "create table shipments (order_id bigint primary key, part text not null)");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100)).start()) {
      queen.queue("orders1").configure(c -> c.retryLimit(3).retryDelay(Duration.ofMillis(50)));
      pushOrders(queen, "orders1", 1, 6);
      // orders 0 and 1 were shipped before (a consumer that crashed after its commit): their markers are there
      queen.kv().once("orders1", "order:0", Kv.ttl(Duration.ofHours(1)));
      queen.kv().once("orders1", "order:1", Kv.ttl(Duration.ofHours(1)));
      AtomicBoolean failOnce = new AtomicBoolean(true);
      try (Subscription s = queen.queue("orders1").group("ship").subscription(SubscriptionMode.ALL).batch(6)
          .consumeInTransaction((m, tx) -> {
            ship(tx.connection(), m); // runs for every message; only what commits stays
            tx.once(m.queue(), "order:" + m.payload().get("id").asLong(), Kv.ttl(Duration.ofHours(1)).required());
            if (m.payload().get("id").asLong() == 3 && failOnce.getAndSet(false)) {
              throw new IllegalStateException("the carrier did not answer");
            }
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() + s.alreadyDone() == 6);
        assertThat(s.alreadyDone()).isEqualTo(2);
        assertThat(s.failed()).isEqualTo(1);
      }
      try (Connection c = db.connection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select order_id from shipments order by 1")) {
        List<Long> ids = new ArrayList<>();
        while (rs.next()) {
          ids.add(rs.getLong(1));
        }
        assertThat(ids).containsExactly(2L, 3L, 4L, 5L);
      }
      assertThat(lag(queen, "orders1", "ship")).isZero();
    }
  }

  @Test
  void theHandlerCannotEndTheLoopsTransaction(TestDatabase db) throws Exception {
    sql(db, "drop table if exists shipments", "create table shipments (order_id bigint primary key, part text not null)");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100)).start()) {
      queen.queue("orders2").configure(c -> c.retryLimit(0));
      pushOrders(queen, "orders2", 1, 2);
      try (Subscription s = queen.queue("orders2").group("ship").subscription(SubscriptionMode.ALL).batch(2)
          .consumeInTransaction((m, tx) -> {
            Connection c = tx.connection();
            ship(c, m);
            if (m.offset() == 0) {
              c.commit(); // refused: the row would commit without the ack
            }
            try (Connection same = tx.connection()) {
              assertThat(same).isSameAs(c); // closing it is harmless
            }
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 1 && s.deadLettered() == 1);
      }
      List<DeadLetter> dead = queen.deadLetters("orders2").group("ship").list(10, null);
      assertThat(dead).singleElement().satisfies(d -> {
        assertThat(d.offset()).isZero();
        assertThat(d.error()).contains("must not call commit()");
      });
      assertThat(count(db, "select count(*) from shipments")).isEqualTo(1);
      assertThat(count(db, "select order_id from shipments")).isEqualTo(1);
    }
  }

  @Test
  void aTransactionOfTheApplicationHasNoConnectionOfItsOwn(TestDatabase db) {
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).start()) {
      assertThatThrownBy(() -> queen.transaction().connection()).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("commit(connection)");
    }
  }

  @Test
  void aPlainHandlerThatAcksInItsOwnTransactionIsNotAckedAgain(TestDatabase db) throws Exception {
    sql(db, "drop table if exists shipments", "create table shipments (order_id bigint primary key, part text not null)",
        "alter database " + db.name() + " set track_functions = 'pl'");
    int n = 12;
    try (HikariDataSource queenPool = db.newDataSource(6); HikariDataSource appPool = db.newDataSource(3)) {
      try (Queen queen = EmbeddedQueen.builder().dataSource(queenPool).pollInterval(Duration.ofMillis(100)).start()) {
        pushOrders(queen, "orders3", 3, n / 3);
        try (Subscription s = queen.queue("orders3").group("ship").subscription(SubscriptionMode.ALL).batch(4)
            .consume(m -> {
              try (Connection c = appPool.getConnection()) {
                c.setAutoCommit(false);
                ship(c, m);
                queen.transaction().ack(m).commit(c);
                c.commit();
              }
            })) {
          await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == n);
          assertThat(s.failed()).isZero();
        }
        assertThat(lag(queen, "orders3", "ship")).isZero();
      }
    } // every session of both pools has ended: their function statistics are flushed
    assertThat(count(db, "select count(*) from shipments")).isEqualTo(n);
    // one ack per message, the handler's; the loop sent none
    assertThat(count(db, "select coalesce(sum(calls), 0) from pg_stat_user_functions where funcname = 'ack'"))
        .isEqualTo(n);
  }
}
