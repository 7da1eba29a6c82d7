package io.queen.embedded.internal.ops;

import com.zaxxer.hikari.HikariConfig;
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
import static org.assertj.core.api.Assertions.assertThat;

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
    makeStale(db, S);
    double kvBefore = reltuples(db, S, "kv");
    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start();
        LogCapture logs = LogCapture.start()) {
      StatisticsGuard guard = Watches.statistics(queen);
      Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500)).untilAsserted(() -> {
        guard.run();
        assertThat(reltuples(db, S, "messages")).isGreaterThan(5_000);
        assertThat(reltuples(db, S, "partitions")).isGreaterThan(1_000);
        assertThat(reltuples(db, S, "cursors")).isGreaterThan(1_000);
      });
      assertThat(logs.linesWith("analyzed", S + "\".messages", "the planner's statistics counted 0 rows")).hasSize(1);
      // a second look finds nothing to do
      guard.run();
      assertThat(logs.linesWith("analyzed", S + "\".messages")).hasSize(1);
    }
    assertThat(reltuples(db, S, "kv")).as("a small table is left to autovacuum").isEqualTo(kvBefore);
  }

  /**
   * A role that uses Queen's tables without owning them may not analyze them (PostgreSQL skips such a table with a
   * warning, no error): the guard says so once and stops, and nothing fails.
   */
  @Test
  void aRoleThatDoesNotOwnTheTablesIsToldOnceAndLeftAlone(TestDatabase db) throws Exception {
    String schema = "statsguard_owned";
    makeStale(db, schema);
    exec(db, "drop role if exists statsguard_user", "create role statsguard_user login password 'statsguard'",
        "grant usage on schema " + schema + " to statsguard_user",
        "grant all on all tables in schema " + schema + " to statsguard_user",
        "grant all on all sequences in schema " + schema + " to statsguard_user",
        "grant execute on all functions in schema " + schema + " to statsguard_user");
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(db.jdbcUrl());
    config.setUsername("statsguard_user");
    config.setPassword("statsguard");
    config.setMaximumPoolSize(4);
    try (HikariDataSource pool = new HikariDataSource(config);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(schema).janitor(false).listen(false).start();
        LogCapture logs = LogCapture.start()) {
      StatisticsGuard guard = Watches.statistics(queen);
      guard.run();
      guard.run();
      assertThat(logs.linesWith("does not own", schema, "left to autovacuum")).hasSize(1);
      assertThat(logs.linesWith("analyzed")).isEmpty();
      assertThat(reltuples(db, schema, "messages")).isZero();
      assertThat(queen.queue("q").partition("p0").push(Map.of("still", "works")).offset()).isPositive();
    } finally {
      exec(db, "drop owned by statsguard_user", "drop role statsguard_user");
    }
  }

  /**
   * Schema {@code schema} in the state a vacuum of emptied tables leaves (zero rows recorded, pages kept), holding
   * 2,000 partitions with their cursors and 10,000 messages again, autovacuum off. Each step on a pool of its own,
   * closed after it: its backends exit and flush their counts, so the vacuum finds the rows deleted and the
   * collector's live rows count the refill.
   */
  private static void makeStale(TestDatabase db, String schema) throws Exception {
    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(schema).janitor(false).listen(false).start()) {
      for (String t : List.of("messages", "partitions", "cursors", "kv")) {
        exec(db, "alter table " + schema + "." + t + " set (autovacuum_enabled = false)");
      }
      fill(queen);
      queen.queue("q").delete();
    }
    awaitLive(db, schema, "partitions", 0);
    exec(db, "vacuum (truncate false, analyze) " + schema + ".messages", "vacuum (truncate false, analyze) " + schema
        + ".partitions", "vacuum (truncate false, analyze) " + schema + ".cursors", "analyze " + schema + ".kv");
    try (HikariDataSource pool = db.newDataSource(8);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(schema).janitor(false).listen(false).start()) {
      fill(queen);
    }
    awaitLive(db, schema, "partitions", 2_000);
    assertThat(reltuples(db, schema, "messages")).isZero();
    assertThat(reltuples(db, schema, "partitions")).isZero();
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
  private static void awaitLive(TestDatabase db, String schema, String table, long live) {
    Awaitility.await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200)).until(() -> {
      try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
          "select n_live_tup from pg_stat_user_tables where relid = '" + schema + "." + table + "'::regclass")) {
        return rs.next() && rs.getLong(1) == live;
      }
    });
  }

  private static double reltuples(TestDatabase db, String schema, String table) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select reltuples from pg_class where oid = '" + schema + "." + table
            + "'::regclass")) {
      rs.next();
      return rs.getDouble(1);
    }
  }
}
