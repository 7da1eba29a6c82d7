package io.queen.embedded.internal;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
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
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The janitor's statistics guard: tables the planner takes for empty after a vacuum (a queue's rows deleted, the
 * pages kept, zero rows recorded) and that hold thousands of rows again are analyzed by the node, without waiting
 * for autovacuum (off here); tables whose estimate is right, or that hold few rows, are left alone.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StatisticsGuardTest {
  private static final String S = "statsguard";

  @Test
  void tablesTakenForEmptyAreAnalyzedAndOthersLeftAlone(TestDatabase db) throws Exception {
    // each step on a pool of its own, closed after it: its backends exit and flush their counts, so the vacuum
    // finds the rows deleted and the collector's live rows count the refill
    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start()) {
      for (String t : List.of("messages", "partitions", "cursors", "kv")) {
        exec(db, "alter table " + S + "." + t + " set (autovacuum_enabled = false)");
      }
      fill(queen);
      queen.queue("q").delete();
    }
    awaitLive(db, "partitions", 0);
    exec(db, "vacuum (truncate false, analyze) " + S + ".messages", "vacuum (truncate false, analyze) " + S
        + ".partitions", "vacuum (truncate false, analyze) " + S + ".cursors", "analyze " + S + ".kv");
    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start()) {
      fill(queen);
    }
    awaitLive(db, "partitions", 2_000);
    assertThat(reltuples(db, "messages")).isZero();
    assertThat(reltuples(db, "partitions")).isZero();
    double kvBefore = reltuples(db, "kv");

    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start();
        LogCapture logs = LogCapture.start()) {
      QueenImpl node = (QueenImpl) queen;
      Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500)).untilAsserted(() -> {
        node.guardStatisticsNow();
        assertThat(reltuples(db, "messages")).isGreaterThan(5_000);
        assertThat(reltuples(db, "partitions")).isGreaterThan(1_000);
        assertThat(reltuples(db, "cursors")).isGreaterThan(1_000);
      });
      assertThat(logs.linesWith("analyzed", S + "\".messages", "the planner's statistics counted 0 rows")).hasSize(1);
      // a second look finds nothing to do
      node.guardStatisticsNow();
      assertThat(logs.linesWith("analyzed", S + "\".messages")).hasSize(1);
    }
    assertThat(reltuples(db, "kv")).as("a small table is left to autovacuum").isEqualTo(kvBefore);
  }

  /** Queue "q" with group "g" (so every partition has a cursor): 2,000 partitions, 10,000 messages. */
  private static void fill(Queen queen) {
    queen.queue("q").configure(c -> c.retryLimit(3));
    queen.queue("q").group("g").subscription(SubscriptionMode.ALL).batch(1).pop();
    for (int b = 0; b < 10; b++) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        int n = b * 1000 + i;
        items.add(PushItem.of("p" + (n % 2000), Map.of("n", n)));
      }
      queen.queue("q").push(items);
    }
    queen.kv().put("guard", "k", Map.of("v", 1), io.queen.Kv.forever());
  }

  private static void exec(TestDatabase db, String... sql) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : sql) {
        st.execute(s);
      }
    }
  }

  /** Waits until the statistics collector counts {@code live} live rows in {@code table}. */
  private static void awaitLive(TestDatabase db, String table, long live) {
    Awaitility.await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200)).until(() -> {
      try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
          "select n_live_tup from pg_stat_user_tables where relid = '" + S + "." + table + "'::regclass")) {
        return rs.next() && rs.getLong(1) == live;
      }
    });
  }

  private static double reltuples(TestDatabase db, String table) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select reltuples from pg_class where oid = '" + S + "." + table + "'::regclass")) {
      rs.next();
      return rs.getDouble(1);
    }
  }
}
