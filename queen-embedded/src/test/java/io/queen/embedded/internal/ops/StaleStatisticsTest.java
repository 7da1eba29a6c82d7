package io.queen.embedded.internal.ops;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every call keeps probing indexes when the statistics say the tables are empty. A vacuum after a queue's rows were
 * deleted leaves its tables' pages in place and records zero rows; until the next analyze the planner takes every
 * table for empty, and a cached plan made then may put a table on the outer side of a join and read all of it per
 * call (push's transaction-id probe could). Here the tables are filled, emptied and vacuumed with autovacuum
 * off, filled again (2,000 partitions with their cursors, 20,000 messages, 2,000 KV entries), and then every kind
 * of call runs many times: one-partition, multi-partition and de-duplicating pushes, a transaction, pops over many
 * partitions, acks, failures with redelivery and to the dead-letter queue, renewals, dead letters listed, counted
 * and redriven, KV puts, gets and increments ({@code status()} is left out: it counts every partition and cursor of
 * a queue by design). Then the index entries each table's indexes returned, per call, must be a small number, not a
 * table's worth. Plans that did read 204 million entries of partitions_pkey and 132 million of messages_pkey
 * in this test.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StaleStatisticsTest {
  private static final String S = "stalestats";
  private static final List<String> TABLES = List.of("messages", "partitions", "cursors", "queues", "consumer_groups",
      "dead_letters", "redeliveries", "kv");

  @Test
  void callsProbeIndexesWhenTheStatisticsSayTheTablesAreEmpty(TestDatabase db) throws Exception {
    try (HikariDataSource pool = db.newDataSource(10);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start()) {
      exec(db, TABLES.stream().map(t -> "alter table " + S + "." + t + " set (autovacuum_enabled = false)")
          .toArray(String[]::new));
      fill(queen, "stale", "old");
      queen.queue("stale").delete();
      exec(db, "delete from " + S + ".kv");
      exec(db, TABLES.stream().map(t -> "vacuum (truncate false, analyze) " + S + "." + t).toArray(String[]::new));
      assertThat(reltuples(db, "messages")).as("the statistics say the log is empty").isZero();
      fill(queen, "stale", "new");
    }
    Map<String, Long> before = flushedIndexReads(db);

    int calls = 0;
    try (HikariDataSource pool = db.newDataSource(10);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start()) {
      for (int i = 0; i < 100; i++, calls++) {
        queen.queue("stale").partition("p" + (i * 7 % 2000)).push(Map.of("one", i)); // push_partition
      }
      for (int i = 0; i < 20; i++, calls++) { // push_fast: existing partitions, generated ids
        List<PushItem> items = new ArrayList<>();
        for (int k = 0; k < 50; k++) {
          items.add(PushItem.of("p" + ((i * 50 + k) * 13 % 2000), Map.of("fast", k)));
        }
        queen.queue("stale").push(items);
      }
      for (int i = 0; i < 20; i++, calls++) { // push: caller ids, half of them stored already
        List<PushItem> items = new ArrayList<>();
        for (int k = 0; k < 50; k++) {
          int n = i * 50 + k;
          String txn = k % 2 == 0 ? "new-" + n : "again-" + i + "-" + k;
          items.add(PushItem.of("p" + (n % 2000), Map.of("dedup", k)).transactionId(txn));
        }
        queen.queue("stale").push(items);
      }
      for (int i = 0; i < 20; i++, calls++) {
        queen.transaction().push(PushItem.to("stale", "p" + i, Map.of("tx", i)).transactionId("tx-" + i)).commit();
      }
      int popped = 0;
      for (int i = 0; i < 60; i++, calls++) {
        List<Message> got = queen.queue("stale").group("g").subscription(SubscriptionMode.ALL).batch(20).partitions(10)
            .leaseTime(Duration.ofSeconds(30)).pop();
        assertThat(got).as("pop %d", i).isNotEmpty();
        popped += got.size();
        if (i % 3 == 0) {
          queen.renew(got.get(0));
          calls++;
        }
        if (i % 5 == 1) {
          queen.ack(got, AckStatus.FAILED, "stale-statistics test");
        } else {
          queen.ack(got);
        }
        calls++;
      }
      assertThat(popped).isGreaterThan(60);
      // a message failed twice (retryLimit 1) is dead-lettered; listed, counted, redriven
      for (int i = 0; i < 10; i++, calls++) {
        queen.queue("stale").partition("dl-" + i).push(Map.of("dl", i));
        for (int attempt = 0; attempt < 2; attempt++, calls += 2) {
          List<Message> one = queen.queue("stale").group("g").partition("dl-" + i).batch(1).pop();
          assertThat(one).as("partition dl-%d, attempt %d", i, attempt).hasSize(1);
          queen.ack(one, AckStatus.FAILED, "stale-statistics test");
        }
      }
      assertThat(queen.deadLetters("stale").group("g").list(100, null)).hasSizeGreaterThanOrEqualTo(10);
      assertThat(queen.deadLetters("stale").group("g").count()).isGreaterThanOrEqualTo(10);
      assertThat(queen.deadLetters("stale").group("g").redriveAll()).isGreaterThanOrEqualTo(10);
      calls += 3;
      for (int i = 0; i < 20; i++, calls += 3) {
        queen.kv().put("stale", "new-" + i, Map.of("v", i), io.queen.Kv.forever());
        assertThat(queen.kv().get("stale", "old-" + i).found()).isFalse();
        queen.kv().incr("stale", "count-" + (i % 3), 1, io.queen.Kv.forever());
      }
    }
    Map<String, Long> after = flushedIndexReads(db);

    Map<String, Long> perIndex = new LinkedHashMap<>();
    after.forEach((index, reads) -> perIndex.put(index, reads - before.getOrDefault(index, 0L)));
    int finalCalls = calls;
    for (Map.Entry<String, Long> e : perIndex.entrySet()) {
      // a scan of the whole table in one call would read 2,000 (partitions, cursors) or 20,000 (messages) entries
      assertThat(e.getValue() / (double) finalCalls).as("index entries of %s read per call (%s in %d calls)",
          e.getKey(), e.getValue(), finalCalls).isLessThan(100.0);
    }
  }

  /** Queue {@code q}, group "g", 2,000 partitions with 10 messages each, half with transaction ids. */
  private static void fill(Queen queen, String q, String prefix) {
    queen.queue(q).configure(c -> c.retryLimit(1)); // creates the queue, so the group and its cursors exist
    queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(1).pop(); // creates the group
    for (int i = 0; i < 2000; i++) {
      queen.kv().put("stale", prefix + "-" + i, Map.of("n", i), io.queen.Kv.forever());
    }
    for (int b = 0; b < 20; b++) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        int n = b * 1000 + i;
        PushItem item = PushItem.of("p" + (n % 2000), Map.of("n", n));
        items.add(n % 2 == 0 ? item.transactionId(prefix + "-" + n) : item);
      }
      queen.queue(q).push(items);
    }
    if (prefix.equals("new")) {
      // the ids the de-duplicating pushes repeat: "again-<i>-<k>" for odd k, stored in their partitions
      List<PushItem> again = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        for (int k = 1; k < 50; k += 2) {
          again.add(PushItem.of("p" + ((i * 50 + k) % 2000), Map.of("a", k)).transactionId("again-" + i + "-" + k));
        }
      }
      queen.queue(q).push(again);
    }
  }

  private static void exec(TestDatabase db, String... sql) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : sql) {
        st.execute(s);
      }
    }
  }

  private static double reltuples(TestDatabase db, String table) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select reltuples from pg_class where oid = '" + S + "." + table + "'::regclass")) {
      rs.next();
      return rs.getDouble(1);
    }
  }

  /**
   * The statistics with every other backend of this database gone: a backend flushes its pending statistics when it
   * exits: the pools the nodes used are closed by then, and any backend still there (the test database's own idle
   * pool, which read nothing of the tables) is terminated and waited for.
   */
  private static Map<String, Long> flushedIndexReads(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      List<Integer> pids = new ArrayList<>();
      try (ResultSet rs = st.executeQuery(
          "with others as materialized (select pid from pg_stat_activity where datname = current_database()"
              + " and pid <> pg_backend_pid() and backend_type = 'client backend')"
              + " select pid from others where pg_terminate_backend(pid)")) {
        while (rs.next()) {
          pids.add(rs.getInt(1));
        }
      }
      String list = pids.isEmpty() ? "0" : pids.toString().replaceAll("[\\[\\] ]", "");
      Awaitility.await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100)).until(() -> {
        try (ResultSet rs = st.executeQuery("select count(*) from pg_stat_activity where pid in (" + list + ")")) {
          rs.next();
          return rs.getLong(1) == 0;
        }
      });
      Map<String, Long> out = new LinkedHashMap<>();
      st.execute("set stats_fetch_consistency = none");
      try (ResultSet rs = st.executeQuery("select relname || '.' || indexrelname, idx_tup_read from pg_stat_user_indexes"
          + " where schemaname = '" + S + "' order by 1")) {
        while (rs.next()) {
          out.put(rs.getString(1), rs.getLong(2));
        }
      }
      return out;
    }
  }
}
